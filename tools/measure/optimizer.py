"""What PyTorch optimizers really keep: weights, gradients, master copies and optimizer state, byte by byte.

A small random Llama-shaped model (nothing downloaded) takes one training step in each setup below; after
``optimizer.step()`` and before ``zero_grad`` the script adds up the distinct storages of the parameters,
their ``.grad``, any fp32 master copies and every tensor in ``optimizer.state``. Setups:

* ``fp32``: fp32 parameters, ``torch.optim.AdamW``;
* ``bf16``: the model cast to bf16 (``model.to(torch.bfloat16)``), ``torch.optim.AdamW``: the moments follow
  the parameters' dtype (``torch.zeros_like(p)``), so they are bf16 too;
* ``autocast``: fp32 parameters (they are the master copy), forward under ``torch.autocast(dtype=bf16)``,
  fp32 gradients; autocast's bf16 copies of the weights are saved for backward while it runs (measured with
  ``saved_tensors_hooks``: bytes of saved bf16 tensors with a weight's shape);
* ``bf16-master``: bf16 model plus a hand-made fp32 master copy that AdamW updates (the Megatron / DeepSpeed /
  apex-O2 recipe): the 16-bit gradients are copied to fp32 master gradients; counted with the 16-bit
  gradients still allocated and after they are freed;
* ``sgd`` (momentum 0.9) and Hugging Face ``Adafactor`` (no first moment), in fp32 and bf16.

Per setup the JSON stores the exact bytes and the bytes per parameter; ``vramlib.optimizer_state_bytes`` and
``vramlib.memory.training.CONVENTIONS`` are compared in ``vramlib.explain.validation``. bitsandbytes is not installed here:
its 8-bit optimizers are not measured (vramlib uses their documented constants).

Usage::

    python tools/measure/optimizer.py            # measure, rewrite vramlib/data/measured/optimizer.json
    python tools/measure/optimizer.py --check    # re-measure, exit 1 if the stored JSON differs
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _offline import ROOT, write_json  # noqa: E402  (Hugging Face offline before transformers loads)

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402
from transformers.optimization import Adafactor  # noqa: E402

import vramlib as vl  # noqa: E402

OUTPUT = ROOT / "vramlib" / "data" / "measured" / "optimizer.json"
COMMAND = "python tools/measure/optimizer.py"
warnings.filterwarnings("ignore")

SHAPE = dict(hidden=128, heads=8, kv_heads=2, ffn=320, vocab=500, layers=3, batch=2, seq=32)
SPEC = vl.ModelSpec("optimizer-probe", SHAPE["layers"], SHAPE["hidden"], SHAPE["heads"], SHAPE["kv_heads"],
                    SHAPE["hidden"] // SHAPE["heads"], SHAPE["ffn"], SHAPE["vocab"], family="llama")
SETUPS = ("fp32", "bf16", "autocast", "bf16-master", "sgd-fp32", "sgd-bf16", "adafactor-fp32", "adafactor-bf16")


def build(dtype=torch.float32):
    torch.manual_seed(0)
    config = AutoConfig.for_model("llama", hidden_size=SHAPE["hidden"], intermediate_size=SHAPE["ffn"],
                                  num_hidden_layers=SHAPE["layers"], num_attention_heads=SHAPE["heads"],
                                  num_key_value_heads=SHAPE["kv_heads"], vocab_size=SHAPE["vocab"],
                                  max_position_embeddings=256, tie_word_embeddings=False, pad_token_id=None,
                                  bos_token_id=None, eos_token_id=None)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").to(dtype)
    model.train()
    return model


def _bytes(tensors) -> int:
    seen = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def _state(opt) -> tuple[int, int, dict]:
    """(bytes of all state tensors, bytes of the per-tensor scalar 'step' tensors, dtypes by state key)."""
    tensors, steps, dtypes = [], [], {}
    for st in opt.state.values():
        for k, v in st.items():
            if torch.is_tensor(v):
                (steps if v.dim() == 0 else tensors).append(v)
                dtypes[k] = str(v.dtype).replace("torch.", "")
    return _bytes(tensors) + sum(v.numel() * v.element_size() for v in steps), \
        sum(v.numel() * v.element_size() for v in steps), dtypes


def _batch():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, SHAPE["vocab"], (SHAPE["batch"], SHAPE["seq"]), generator=g)


def measure(setup: str) -> dict:
    ids = _batch()
    half = setup in ("bf16", "bf16-master", "sgd-bf16", "adafactor-bf16")
    model = build(torch.bfloat16 if half else torch.float32)
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    out = {"setup": setup, "params": n, "param_tensors": len(params)}
    weight_cast_bytes = 0
    if setup == "autocast":
        weights = [p for p in params if p.dim() == 2]
        casts: dict[int, int] = {}

        def pack(t):
            # a saved bf16 copy of a weight (or its transposed view, as matmul saves it)
            if t.dtype == torch.bfloat16 and t.dim() == 2:
                for w in weights:
                    for cand in (t, t.t()):
                        if cand.shape == w.shape and torch.equal(cand, w.detach().to(torch.bfloat16)):
                            casts[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        weight_cast_bytes = sum(casts.values())
    else:
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    master_bytes = master_grad_bytes = 0
    grads_16_bytes = None
    if setup == "bf16-master":
        master = [p.detach().float().requires_grad_(True) for p in params]
        for m, p in zip(master, params):
            m.grad = p.grad.float()
        opt = torch.optim.AdamW(master, lr=1e-3)
        opt.step()
        master_bytes, master_grad_bytes = _bytes(master), _bytes([m.grad for m in master])
        grads_16_bytes = _bytes([p.grad for p in params])
    elif setup.startswith("sgd"):
        opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9)
        opt.step()
    elif setup.startswith("adafactor"):
        opt = Adafactor(params, scale_parameter=True, relative_step=True, warmup_init=False, lr=None)
        opt.step()
    else:
        opt = torch.optim.AdamW(params, lr=1e-3)
        opt.step()
    state, step_bytes, dtypes = _state(opt)
    out.update(param_bytes=_bytes(params), param_dtype=str(params[0].dtype).replace("torch.", ""),
               grad_bytes=_bytes([p.grad for p in params]), grad_dtype=str(params[0].grad.dtype).replace("torch.", ""),
               master_bytes=master_bytes, master_grad_bytes=master_grad_bytes, state_bytes=state,
               state_step_bytes=step_bytes, state_dtypes=dtypes, weight_cast_bytes=weight_cast_bytes)
    if grads_16_bytes is not None:
        out["grad_bytes_freed_after_copy"] = 0
    # bytes per parameter (the per-tensor scalar step counters excluded; they are reported separately)
    out["per_param"] = {
        "weights": out["param_bytes"] / n, "grads": out["grad_bytes"] / n, "master": master_bytes / n,
        "master_grads": master_grad_bytes / n, "optimizer": (state - step_bytes) / n,
        "weight_casts_transient": weight_cast_bytes / n}
    out["total_per_param"] = sum(v for k, v in out["per_param"].items() if k != "weight_casts_transient")
    if setup == "bf16-master":
        out["total_per_param_16bit_grads_freed"] = out["total_per_param"] - out["per_param"]["grads"]
    return out


def measure_all() -> list[dict]:
    return [measure(s) for s in SETUPS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="re-measure; exit 1 if the stored JSON differs")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    rows = measure_all()
    for r in rows:
        pp = ", ".join(f"{k} {v:g}" for k, v in r["per_param"].items() if v)
        print(f"{r['setup']:16s} {r['total_per_param']:6.2f} B/param  ({pp})")
    if args.check:
        stored = {r["setup"]: r for r in json.loads(OUTPUT.read_text())["rows"]}
        keys = ("param_bytes", "grad_bytes", "master_bytes", "master_grad_bytes", "state_bytes", "weight_cast_bytes")
        drift = [r["setup"] for r in rows if any(stored.get(r["setup"], {}).get(k) != r[k] for k in keys)]
        for s in drift:
            print(f"STORED DIFFERS: {s}", file=sys.stderr)
        return 1 if drift else 0
    out = {
        "command": COMMAND, "torch": torch.__version__, "transformers": transformers.__version__,
        "python": platform.python_version(), "device": "cpu", "shape": SHAPE,
        "vramlib_n_params": SPEC.n_params,
        "bitsandbytes": None,
        "note": ("bytes after one optimizer.step(), before zero_grad: distinct storages of the parameters, their "
                 "grads, fp32 master copies (bf16-master) and optimizer.state tensors; per_param divides by the "
                 "parameter count, the scalar 'step' tensors (4 bytes per parameter tensor) left out. "
                 "bitsandbytes is not installed: 8-bit optimizers are not measured."),
        "rows": rows,
    }
    write_json(OUTPUT, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
