"""Shared set-up of the measurement scripts: Hugging Face offline (nothing is ever fetched from the Hub),
the repository on ``sys.path`` (so ``import vramlib`` finds this checkout), and the JSON writer.

Import it before transformers: ``from _offline import ROOT, write_json``.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def write_json(path: Path, data: dict) -> None:
    """Write a measurement file (indented, trailing newline) and say so on stderr."""
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)


def language_model_config(cfg: dict):
    """transformers' config of the language model a ``config.json`` (without private keys) describes: the config
    class's own ``get_text_config(decoder=True)``, so an image-text config (Gemma-3, Llama-4, Mistral-3) gives its
    ``text_config`` as transformers builds it, and a text-only config itself."""
    from transformers import AutoConfig

    cfg = dict(cfg)
    return AutoConfig.for_model(cfg.pop("model_type"), **cfg).get_text_config(decoder=True)


def meta_safe_rope(config) -> bool:
    """Swap a longrope rotary embedding (Phi-3.5-MoE) for the default one: longrope reads a tensor's value
    (``.item()``), which the meta device cannot, and no parameter or cache shape depends on it. True if swapped."""
    rope = getattr(config, "rope_parameters", None)
    if not rope or rope.get("rope_type") != "longrope":
        return False
    config.rope_parameters = {"rope_type": "default", "rope_theta": rope.get("rope_theta", 10000.0)}
    return True


def header(command: str, device: str, note: str) -> dict:
    """The fields every measurement file opens with: the command, the library versions, the device, a note."""
    import platform

    import torch
    import transformers

    return {"command": command, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "device": device, "note": note}
