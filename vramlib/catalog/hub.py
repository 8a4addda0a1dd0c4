"""A model id in: ``config.json`` from the Hugging Face Hub (or its local cache), nothing else.

``hub_config(model_id)`` fetches only ``config.json`` with ``huggingface_hub.hf_hub_download``, reading the local
cache (``HF_HOME`` / ``HF_HUB_CACHE``, or ``cache_dir``); ``HF_HUB_OFFLINE=1``, read at each call, reads the cache
only (``local_files_only``). Every failure (offline with no cached copy, an unknown or gated repository, no such
revision, no network) is one line naming the id. ``ModelSpec.from_pretrained`` and ``vramlib fit --model Org/Name``
read the file it returns. Used in: the CLI and workshops (a reader's own model).
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..core.errors import ConfigError, InvalidValueError

HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
"""A Hub repository id: ``owner/name`` (letters, digits, ``.``, ``_``, ``-``)."""


def is_hub_id(text: object) -> bool:
    """Whether ``text`` reads as a Hub model id (``Qwen/Qwen3-8B``) rather than a file path."""
    return isinstance(text, str) and bool(HUB_ID.match(text.strip())) and not text.strip().endswith(".json")


def hub_config(model_id: str, revision: str | None = None, cache_dir: str | Path | None = None) -> Path:
    """The local path of ``model_id``'s ``config.json`` (downloaded once when online, else from the cache)."""
    if not is_hub_id(model_id):
        raise InvalidValueError("model_id", model_id, "give a Hub id such as 'Qwen/Qwen3-8B' (owner/name)")
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise InvalidValueError("revision", revision, "must be a branch, tag or commit, or None for main")
    try:
        import huggingface_hub as hub
        from huggingface_hub import errors
    except ImportError:  # pragma: no cover (requirements.txt installs it)
        raise ConfigError("model_id", "reading a Hub id needs huggingface_hub (pip install huggingface_hub)",
                          source=model_id) from None
    where = f"{model_id}" + (f"@{revision}" if revision else "")
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if cache_dir is None:  # read at each call too (huggingface_hub reads them once, when it is first imported)
        home = os.environ.get("HF_HOME")
        cache_dir = os.environ.get("HF_HUB_CACHE") or (str(Path(home) / "hub") if home else None)
    try:
        return Path(hub.hf_hub_download(model_id.strip(), "config.json", revision=revision,
                                        cache_dir=str(cache_dir) if cache_dir is not None else None,
                                        local_files_only=offline))
    except errors.GatedRepoError:
        problem = "a gated repository: accept its licence on huggingface.co and log in (hf auth login)"
    except errors.RepositoryNotFoundError:
        problem = "no such model on the Hub (or a private one you are not logged in for)"
    except errors.RevisionNotFoundError:
        problem = f"no revision {revision!r}"
    except errors.LocalEntryNotFoundError:  # before EntryNotFoundError, its base class
        problem = ("no cached config.json, and the Hub is not reachable (offline: HF_HUB_OFFLINE=1, or no network); "
                   "fetch it once online or give the path of a config.json")
    except errors.EntryNotFoundError:
        problem = "the repository has no config.json"
    except (errors.HfHubHTTPError, OSError, ValueError) as e:
        problem = f"cannot fetch config.json ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    raise ConfigError("model_id", problem, source=where)
