"""Link each glossary term on its first use in every chapter (``{term}`` roles to book/glossary.md).

A term's first occurrence in a chapter's prose -- outside code, math, roles (glue, cite ...), links, headings and
fenced blocks -- becomes ``{term}`text <Term>```; later ones stay plain. ``--check`` changes nothing and exits 1
naming each chapter whose first use of a term is not a link (``tests/test_notebook_format.py`` runs it).

Usage: ``python tools/link_terms.py [--check]``
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_B = r"(?<![-\w])"
_E = r"(?![-\w])"
TERMS: dict[str, str] = {
    "1F1B": r"\b1F1B\b", "AWQ": r"\bAWQ\b", "CUDA context": r"\bCUDA context\b", "DP": _B + "DP" + _E,
    "EP": _B + "EP" + _E, "FlashAttention": r"\bFlashAttention\b", "FP8": r"\bFP8\b", "FSDP": r"\bFSDP2?\b",
    "GGUF": r"\bGGUF\b", "GPTQ": r"\bGPTQ\b", "GQA": r"\bGQA\b", "KV cache": r"\bKV[ -]cache\b",
    "LoRA": r"\bLoRA\b", "MFU": r"\bMFU\b", "MLA": r"\bMLA\b", "MoE": r"\bMoE\b", "MQA": r"\bMQA\b",
    "NF4": r"\bNF4\b", "paged attention": r"\b[Pp]aged[ -]?[Aa]ttention\b", "PP": _B + "PP" + _E,
    "prefill": r"\bprefill\b", "recompute": r"\brecomput(?:e|ation)\b", "roofline": r"\broofline\b",
    "SDPA": r"\bSDPA\b", "SP": _B + "SP" + _E, "TP": _B + "TP" + _E, "ZeRO": r"\bZeRO\b",
}
"""Glossary term -> the pattern of its uses in prose (the glossary page defines each, book/glossary.md)."""

_PROTECT = re.compile(r"(?s:```.*?```)|(?s:\$\$.*?\$\$)|\{[a-z:-]+\}`[^`]*`|`[^`]*`|\$[^$\n]+\$"
                      r"|\[[^\]]*\]\([^)]*\)|<[^>]+>|^#[^\n]*$|^\([^\n]*\)=[ \t]*$", re.M)
_ROLE = re.compile(r"\{term\}`(?:[^`<]*<)?([^`>]+)>?`")


def _spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _PROTECT.finditer(text)]


def _first_plain(text: str, pattern: str) -> re.Match | None:
    spans = _spans(text)
    for m in re.finditer(pattern, text):
        if not any(a <= m.start() < b for a, b in spans):
            return m
    return None


def _linked(text: str) -> set[str]:
    return {m.group(1).strip() for m in _ROLE.finditer(text)}


def chapter_problems(cells: list[str]) -> list[str]:
    """Terms whose first use in these markdown cells (in order) is not a {term} link."""
    out, done = [], set()
    for text in cells:
        linked = _linked(text)
        for term, pat in TERMS.items():
            if term in done:
                continue
            m = _first_plain(text, pat)
            role_at = min((r.start() for r in _ROLE.finditer(text) if r.group(1).strip() == term), default=None)
            if term in linked and (m is None or (role_at is not None and role_at < m.start())):
                done.add(term)
            elif m is not None:
                out.append(term)
                done.add(term)
    return out


def link_cells(cells: list[str]) -> list[str]:
    """The cells with each term's first plain use linked (a term linked earlier is left alone)."""
    done, result = set(), []
    for text in cells:
        for term, pat in TERMS.items():
            if term in done:
                continue
            if term in _linked(text):
                done.add(term)
                continue
            m = _first_plain(text, pat)
            if m is not None:
                shown = m.group(0)
                role = f"{{term}}`{shown}`" if shown == term else f"{{term}}`{shown} <{term}>`"
                text = text[:m.start()] + role + text[m.end():]
                done.add(term)
        result.append(text)
    return result


def _markdown(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "markdown"]


def main(argv: list[str]) -> int:
    bad = []
    for path in sorted((ROOT / "book").glob("ch*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        cells = _markdown(nb)
        texts = ["".join(c["source"]) for c in cells]
        if "--check" in argv:
            missing = chapter_problems(texts)
            if missing:
                bad.append(f"{path.stem}: {', '.join(missing)}")
            continue
        new = link_cells(texts)
        if new != texts:
            for c, t in zip(cells, new):
                c["source"] = t.splitlines(True)
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            print(f"linked terms in {path.name}")
    if bad:
        print("first use not linked to the glossary:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
