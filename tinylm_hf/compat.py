"""Every difference between the transformers releases tinylm_hf supports, in one place.

The supported range is ``TRANSFORMERS_REQUIREMENT`` (the same as in ``pyproject.toml``; a test checks
that they agree). Importing this module refuses an older transformers with one line saying what to
install, and warns on a newer one, which nobody has tested: transformers renames parts of the model
contract between minor releases, and a model that misses a rename generates wrong text without an
error.

A remote-code entry file (one a saved folder's ``auto_map`` names: the config, model and tokenizer
classes) imports this module before anything else, so that a folder says what it needs instead of
failing deep inside an import (``remote_code.py`` writes it into every folder it builds).

Each version branch below names the release it exists for. To support a new release, add its branch
here, then raise the cap here and in ``pyproject.toml`` (``scripts/check_upstream.py`` finds what broke).
"""

from __future__ import annotations

import re
import warnings

import transformers

TRANSFORMERS_FLOOR = (5, 10, 1)  # the oldest release CI runs (.ci/run, the floor virtualenv)
TRANSFORMERS_CAP = (5, 26)  # the first minor release nobody has tested
TRANSFORMERS_REQUIREMENT = f">={'.'.join(map(str, TRANSFORMERS_FLOOR))},<{'.'.join(map(str, TRANSFORMERS_CAP))}"


def transformers_release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string: "5.24.0" -> (5, 24, 0); "5.26.0rc1" and "5.26.0.dev0" -> (5, 26, 0)."""
    match = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def require_supported_transformers(version: str | None = None) -> None:
    """Raise ImportError below the floor, warn at or past the cap; ``version`` defaults to the installed one."""
    version = transformers.__version__ if version is None else version
    release = transformers_release(version)
    install = f"pip install 'transformers{TRANSFORMERS_REQUIREMENT}'"
    if release < TRANSFORMERS_FLOOR:
        raise ImportError(f"this model's code needs transformers{TRANSFORMERS_REQUIREMENT}; found {version}: {install}")
    if release[:2] >= TRANSFORMERS_CAP:
        warnings.warn(
            f"this model's code was tested with transformers{TRANSFORMERS_REQUIREMENT}; found {version}, which "
            f"may have renamed part of the model contract: if outputs look wrong, {install}",
            stacklevel=2,
        )


require_supported_transformers()

INSTALLED_RELEASE = transformers_release(transformers.__version__)

# transformers 5.24 renamed the KV cache argument of forward/generate and the output field from
# `past_key_values` to `cache` (the old name stays only as a deprecated alias inside transformers' own
# classes). Models take both spellings; outputs use the installed release's name.
CACHE_NAME = "cache" if INSTALLED_RELEASE >= (5, 24) else "past_key_values"


def resolve_cache(cache, past_key_values):
    """The KV cache passed as ``cache=`` (transformers >= 5.24) or ``past_key_values=`` (before): at most one.

    Where ``cache`` is the name, the old one still works and warns (FutureWarning), as in transformers' own models.
    """
    if cache is not None and past_key_values is not None:
        raise ValueError("pass the KV cache once: as cache= (transformers >= 5.24) or past_key_values=, not both")
    if past_key_values is not None and CACHE_NAME == "cache":
        warnings.warn(
            "`past_key_values` is deprecated since transformers 5.24: pass the KV cache as `cache=`",
            FutureWarning,
            stacklevel=3,
        )
    return past_key_values if cache is None else cache


