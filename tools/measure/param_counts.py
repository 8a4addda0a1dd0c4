"""Count the parameters of real model configurations with transformers.

For every ``vramlib/data/hf_configs/<key>.json`` (a Hugging Face ``config.json``),
build the causal-LM model with ``AutoModelForCausalLM.from_config`` on the
``meta`` device -- nothing is allocated and nothing is downloaded -- and count
``sum(p.numel() for p in model.parameters())``. ``parameters()`` yields a shared
tensor once, so tied input/output embeddings are counted once.

The counts go to ``vramlib/data/measured/param_counts.json``.

Usage::

    python tools/measure/param_counts.py              # measure all, rewrite the JSON
    python tools/measure/param_counts.py --only gpt2  # measure one, update its entry
    python tools/measure/param_counts.py --check      # recompute, exit 1 on any difference
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _offline import language_model_config  # noqa: E402  (Hugging Face offline before transformers loads)

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "vramlib" / "data" / "hf_configs"
OUTPUT = ROOT / "vramlib" / "data" / "measured" / "param_counts.json"
COMMAND = "python tools/measure/param_counts.py"

# Config attributes worth recording as transformers resolved them (defaults
# applied, aliases such as GPT-2's n_embd -> hidden_size followed).
RESOLVED_ATTRS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "num_local_experts",
    "num_experts_per_tok",
)

# A decoder block lives at "<prefix>.<layers|h>.<index>.<rest>".
LAYER_RE = re.compile(r"^(?:.*\.)?(?:layers|h)\.(\d+)\.")


def load_config(path: Path):
    """The raw config.json and its language model's transformers config (an image-text config's text model, which
    vramlib counts); quantization_config is dropped: the meta-device build counts parameters, not storage."""
    raw = json.loads(path.read_text())
    cfg = {k: v for k, v in raw.items() if not k.startswith("_") and k != "quantization_config"}
    return raw, language_model_config(cfg)


def build_meta_model(config):
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def count(model) -> dict:
    """Total and a breakdown: embedding, lm_head, decoder layers, other (final norm)."""
    emb_in = model.get_input_embeddings()
    emb_out = model.get_output_embeddings()
    tied = emb_out is not None and emb_out.weight is emb_in.weight

    input_emb_ids = {id(emb_in.weight)}
    # Other nn.Embedding modules (GPT-2's position table) count as embedding too.
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding):
            input_emb_ids.add(id(module.weight))
    lm_head_ids = set()
    if emb_out is not None and not tied:
        lm_head_ids = {id(p) for p in emb_out.parameters()}

    total = embedding = lm_head = other = 0
    per_layer: dict[int, int] = {}
    for name, p in model.named_parameters():  # shared tensors are yielded once
        n = p.numel()
        total += n
        if id(p) in input_emb_ids:
            embedding += n
        elif id(p) in lm_head_ids:
            lm_head += n
        else:
            m = LAYER_RE.match(name)
            if m:
                idx = int(m.group(1))
                per_layer[idx] = per_layer.get(idx, 0) + n
            else:
                other += n

    layer_sizes = sorted(set(per_layer.values()))
    layers_total = sum(per_layer.values())
    assert total == embedding + lm_head + layers_total + other
    return {
        "n_params": total,
        "tied_embeddings": tied,
        "embedding": embedding,
        "lm_head": lm_head,
        "n_layers": len(per_layer),
        "per_layer": layer_sizes[0] if len(layer_sizes) == 1 else layer_sizes,
        "layers_total": layers_total,
        "other": other,
    }


EXPERT_COUNT_ATTRS = ("num_local_experts", "num_experts", "n_routed_experts")


def active_params(model, config, total: int) -> int | None:
    """Parameters one token touches: ``total`` less, in every MoE layer, the routed experts it is not sent to --
    routed-expert parameters (names with ``.experts.``: fused ``experts.gate_up_proj`` / ``down_proj`` and their
    biases, or ``experts.<i>.*``; shared experts, routers and gates are named otherwise) x (1 - top_k / E).
    None for a dense model."""
    k = getattr(config, "num_experts_per_tok", None)
    n_exp = next((getattr(config, a) for a in EXPERT_COUNT_ATTRS if getattr(config, a, None)), None)
    routed = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    if not routed or not k or not n_exp:
        return None
    assert (routed * (n_exp - k)) % n_exp == 0
    return total - routed * (n_exp - k) // n_exp


def measure(key: str) -> dict:
    path = CONFIG_DIR / f"{key}.json"
    raw, config = load_config(path)
    model = build_meta_model(config)
    result = count(model)
    resolved = {}
    for attr in RESOLVED_ATTRS:
        value = getattr(config, attr, None)
        if value is not None:
            resolved[attr] = value
    n = result.pop("n_params")
    active = active_params(model, config, n)
    return {
        "n_params": n,
        **({"n_active_params": active} if active is not None else {}),
        "source": raw.get("_source"),
        "config": f"vramlib/data/hf_configs/{key}.json",
        "model_class": type(model).__name__,
        "breakdown": result,
        "resolved_config": resolved,
    }


def all_keys() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="KEY",
                        help="measure only this config (repeatable)")
    parser.add_argument("--check", action="store_true",
                        help="recompute; exit non-zero if any count (total or breakdown) differs "
                             "from the stored JSON; write nothing")
    args = parser.parse_args(argv)

    keys = all_keys()
    if args.only:
        unknown = [k for k in args.only if k not in keys]
        if unknown:
            parser.error(f"no config for {unknown}; known: {', '.join(keys)}")
        keys = sorted(args.only)

    stored = json.loads(OUTPUT.read_text()) if OUTPUT.exists() else None

    start = time.perf_counter()
    measured = {}
    for key in keys:
        t0 = time.perf_counter()
        measured[key] = measure(key)
        print(f"{key:16s} {measured[key]['n_params']:>18,d}  ({time.perf_counter() - t0:.1f} s)",
              flush=True)
    elapsed = time.perf_counter() - start
    print(f"measured {len(keys)} model(s) in {elapsed:.1f} s", file=sys.stderr)

    if args.check:
        if stored is None:
            print(f"CHECK FAILED: {OUTPUT} does not exist", file=sys.stderr)
            return 1
        failures = []
        for key, entry in measured.items():
            old = stored.get("models", {}).get(key)
            if old is None:
                failures.append(f"{key}: not in stored JSON")
            elif old["n_params"] != entry["n_params"]:
                failures.append(f"{key}: stored {old['n_params']:,d}, measured {entry['n_params']:,d}")
            elif old.get("breakdown") != entry["breakdown"]:
                failures.append(f"{key}: breakdown differs: stored {old.get('breakdown')}, "
                                f"measured {entry['breakdown']}")
            elif old != entry:
                print(f"warning: {key}: same counts, other fields differ "
                      "(resolved config / model class)", file=sys.stderr)
        if not args.only:
            for key in stored.get("models", {}):
                if key not in measured:
                    failures.append(f"{key}: in stored JSON but has no config")
        for line in failures:
            print("CHECK FAILED: " + line, file=sys.stderr)
        if not failures:
            print(f"check ok: {len(measured)} count(s) match {OUTPUT.relative_to(ROOT)}",
                  file=sys.stderr)
        return 1 if failures else 0

    models = dict(stored["models"]) if (stored and args.only) else {}
    models.update(measured)
    out = {
        "command": COMMAND,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "device": "meta",
        "note": "n_params = sum(p.numel() for p in model.parameters()) of "
                "AutoModelForCausalLM.from_config(config) built on the meta device; "
                "tied input/output embeddings are counted once.",
        "models": {k: models[k] for k in sorted(models)},
    }
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {OUTPUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
