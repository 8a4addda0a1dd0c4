"""Write book/cheatsheet.md: the workshop's one-page sheet of the formulas, printed from vramlib's own sympy
expressions (never retyped), each with what its symbols mean and the chapter that derives it.

Run after changing a formula: ``.venv/bin/python tools/make_cheatsheet.py``; ``tests/test_notebook_format.py``
checks that the committed page equals what this writes.
"""
from __future__ import annotations

import sys
from pathlib import Path

import sympy as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vramlib.core import formulas as F  # noqa: E402
from vramlib.serve import offload as O, serving as S  # noqa: E402

ROWS = [
    ("Weights", "W", F.WEIGHTS_BYTES, "N_q parameters at b_q bits, N_u kept at b_u bits (embeddings, norms)", "ch01"),
    ("KV cache", "K", F.KV_CACHE_BYTES, "L layers, T tokens, B sequences, 2 n_kv d values of b_kv bytes per token "
     "per layer", "ch07"),
    ("Longest context", "T_{max}", F.MAX_TOKENS_KV_ONLY, "memory M less weights W and reserve R, over the KV cache "
     "per token", "ch01"),
    ("Prefill workspace", "A_{prefill}", F.PREFILL_WORKSPACE_BYTES, "the activations one forward pass holds "
     "(e_att = 1: eager attention's T x T scores)", "ch05"),
    ("Training states", "S", F.MODEL_STATES_BYTES, "N_t trainable parameters: weights, gradients, master copy, "
     "optimizer states (bytes each)", "ch02"),
    ("vLLM's KV budget", "K_{avail}", S.AVAILABLE_KV_BYTES, "utilization u of CUDA's total, less weights, the "
     "profiled activation peak, non-torch memory and CUDA graphs", "ch08"),
    ("Decode time per token", "t", O.DECODE_SECONDS, "bytes read on the GPU and in host memory over each "
     "memory's bandwidth (GB/s)", "ch17"),
]


def page() -> str:
    lines = ["(cheatsheet)=", "# Cheat sheet: the formulas on one page", "",
             "For the workshop: print this page. Every formula is printed from the library's own expression "
             "(`tools/make_cheatsheet.py`), so it is the one the chapters and calculators compute with. "
             "GB = 10⁹ bytes, GiB = 2³⁰ bytes.", "",
             "| quantity | formula | in words | derived in |", "|---|---|---|---|"]
    for name, lhs, expr, words, chapter in ROWS:
        tex = sp.latex(expr).replace("|", r"\vert ")
        lines.append(f"| {name} | ${lhs} = {tex}$ | {words} | {{doc}}`{_doc(chapter)}` |")
    lines += ["", "What follows from them: a 16-bit weight is 2 bytes, a 4-bit one a little more than half a byte once "
              "its scales are counted; the KV cache grows linearly with the context and with the sequences served; "
              "a decode step reads every weight once, so its speed is memory bandwidth over the bytes read.", ""]
    return "\n".join(lines)


def _doc(stem: str) -> str:
    return next(p.stem for p in (ROOT / "book").glob(f"{stem}*.ipynb"))


if __name__ == "__main__":
    (ROOT / "book" / "cheatsheet.md").write_text(page())
    print(page())
