"""`tinylm push`: check a saved model folder, render its card, upload both to the Hub in one commit."""

from __future__ import annotations

import argparse

HELP = "check a saved model folder, write its card, upload it to the Hub"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="folder written by save_pretrained (model + tokenizer)")
    parser.add_argument("--repo-id", required=True, help="target repository, owner/name")
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--revision", default=None, help="branch to push to (created if missing)")
    parser.add_argument("--dry-run", action="store_true", help="check and list the files; upload and change nothing")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow running the folder's own *.py files while checking it (only for folders you trust)")


def run(args: argparse.Namespace) -> int:
    from ..publish import push_folder

    files = push_folder(args.dir, args.repo_id, private=args.private, revision=args.revision, dry_run=args.dry_run,
                        trust_remote_code=args.trust_remote_code)
    target = args.repo_id + (f"@{args.revision}" if args.revision else "")
    print(("Would upload" if args.dry_run else "Uploaded") + f" {len(files)} files to {target}:")
    for name in files:
        print(f"  {name}")
    return 0
