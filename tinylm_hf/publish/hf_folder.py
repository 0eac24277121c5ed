"""`publish_run`: turn a finished run (its `RunSummary` and checkpoint) into a Hugging Face model folder.

The folder holds the model (`save_pretrained`: config, safetensors, the remote code), the tokenizer
that made the data, `generation_config.json` and the model card. It is built in a temporary sibling
and renamed into place, so a failure leaves the previous folder (if any) intact.
"""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Any, Literal

from ..corpus.token_files import check_tokenizer_fingerprint
from ..fileio import check_ours_to_replace, make_folders, make_temp, raise_no_space, seal_folder
from ..tokenization.chat_template import stop_token_ids
from ..tokenizer_loading import load_tokenizer
from ..training.run.checkpoint import read_checkpoint
from ..training.run.folder import HF_DIR, RunDirectory
from ..training.run.state import RUN_TOKENIZER_DIR
from ..training.run.summary import RunSummary
from .folder import check_tokenizer_fits
from .model_card import write_model_card



def model_from_checkpoint(path: str | os.PathLike) -> Any:
    """The model of a training checkpoint, its objective's class (`TinyLMForCausalLM`, `TinyLMForMaskedLM`,
    `TinyLMForSequenceClassification`) holding the checkpoint's weights."""
    from ..training.objectives import objective_class

    checkpoint = read_checkpoint(path)
    objective = objective_class(checkpoint.objective, checkpoint.model_config)
    model = objective.model_class()(checkpoint.tinylm_config())
    model.load_state_dict(checkpoint.model)
    return model.eval()


def run_tokenizer_dir(summary: RunSummary, given: str | os.PathLike | None = None) -> Path:
    """The tokenizer folder a run publishes with: `given`, else the one it recorded, else (that folder deleted while
    the run trained) the copy the run kept beside its checkpoints; the fingerprint is checked by the caller."""
    folder = given or summary.train_config.get("tokenizer_dir") or summary.data.tokenizer_dir
    kept = RunDirectory(summary.out_dir).checkpoints / RUN_TOKENIZER_DIR
    if not given and (not folder or not Path(folder).is_dir()) and kept.is_dir():
        return kept
    if not folder or not Path(folder).is_dir():
        raise FileNotFoundError(f"the tokenizer folder {folder} recorded for this run is missing; pass tokenizer_dir / "
                                "--tokenizer-dir")
    return Path(folder)


def publish_run(
    summary: RunSummary,
    out: str | os.PathLike | None = None,
    *,
    checkpoint: Literal["last", "best"] = "last",
    tokenizer_dir: str | os.PathLike | None = None,
    name: str | None = None,
) -> Path:
    """Write the run's Hugging Face folder (default: out_dir/hf) from its last (or best) checkpoint; the card calls
    the model `name` (default: the name of the run's out_dir).

    An earlier model folder at `out` is replaced; anything else there (a file, a folder of other files) is refused.
    """
    from transformers import GenerationConfig

    from ..registration import register
    from ..training.objectives import objective_class

    register()
    source = summary.best_checkpoint if checkpoint == "best" else summary.checkpoint
    if not source:
        raise FileNotFoundError(f"the run in {summary.out_dir} has no {checkpoint} checkpoint to publish")
    tokenizer_dir = run_tokenizer_dir(summary, tokenizer_dir)
    tokenizer = copy.deepcopy(load_tokenizer(tokenizer_dir))  # the loader's copy is shared: this one may change
    check_tokenizer_fingerprint(tokenizer, summary.data.tokenizer_fingerprint, folder=tokenizer_dir,
                                made=f"the data of the run in {summary.out_dir}")
    model = model_from_checkpoint(source)
    check_tokenizer_fits(tokenizer, model.config.vocab_size, tokenizer_dir)
    model.config.tokenizer_fingerprint = summary.data.tokenizer_fingerprint  # what the exports check the folder by
    objective = objective_class(summary.objective)
    objective.prepare_tokenizer(tokenizer, model.config, summary)
    out = check_ours_to_replace(Path(out) if out is not None else Path(summary.out_dir) / HF_DIR, "config.json",
                                "a model folder")
    make_folders(out.parent)
    tmp = make_temp(out.parent, out.name, directory=True)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else model.config.eos_token_id
        stops = stop_token_ids(tokenizer) or [eos]  # a chat model stops at the end of its turn
        if objective.publishes().generation_config:
            GenerationConfig(
                bos_token_id=model.config.bos_token_id, eos_token_id=stops if len(stops) > 1 else eos,
                pad_token_id=eos, do_sample=True, temperature=0.8, top_k=50, max_new_tokens=200,
            ).save_pretrained(tmp)
        name = name or Path(summary.out_dir).resolve().name
        write_model_card(tmp, summary, model=model, model_name=name, repo_id=f"your-name/{name}")
        seal_folder(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise_no_space(err, out.parent, out.name)
        raise
    return out
