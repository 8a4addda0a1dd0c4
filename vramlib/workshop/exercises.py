"""Self-checking exercises: every answer is computed by vramlib, and ``check`` says right or wrong with a hint.

A workshop host can collect who solved what: with ``record`` (a JSONL path), ``configure(log=...)`` or the
environment variable ``VRAMLIB_EXERCISE_LOG``, every check appends one JSON line (time, who, key, answer,
computed answer, right or not); ``summarize(logs)`` (or ``vramlib exercises summary``) tabulates them.

Used in: every chapter's exercises (keys ``chNN-k``, registered in :mod:`vramlib.workshop.exercise_bank`) and the workshop.
"""
from __future__ import annotations

import json
import math
import numbers
import os
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..core.errors import InvalidValueError, UnknownNameError

LOG_ENV = "VRAMLIB_EXERCISE_LOG"
"""Environment variable naming a JSONL file that every :func:`check` appends to."""
WHO_ENV = "VRAMLIB_PARTICIPANT"
"""Environment variable naming the participant recorded with each check."""


@dataclass(frozen=True)
class Exercise:
    """A question whose answer is a number computed by vramlib."""

    key: str
    question: str
    answer: Callable[[], float]
    unit: str
    rel_tol: float
    hint: str


@dataclass(frozen=True)
class Result:
    """The outcome of :func:`check`; prints as one line."""

    key: str
    correct: bool
    given: float
    expected: float
    message: str

    def __str__(self) -> str:
        return self.message

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = "#1b7837" if self.correct else "#b00020"
        return f"<span style='color:{colour}'>{self.message}</span>"


EXERCISES: dict[str, Exercise] = {}
_SESSION: dict[str, str | None] = {"who": None, "log": None}


def register(key: str, question: str, answer: Callable[[], float], unit: str, hint: str, rel_tol: float = 0.01) -> None:
    """Add an exercise (chapters' exercises are registered in :mod:`vramlib.workshop.exercise_bank`)."""
    EXERCISES[key] = Exercise(key, question, answer, unit, rel_tol, hint)


def _load() -> None:
    if not EXERCISES:
        from . import exercise_bank  # noqa: F401  (registers on import)


def _get(key: str) -> Exercise:
    _load()
    if key not in EXERCISES:
        raise UnknownNameError("exercise", key, EXERCISES)
    return EXERCISES[key]


def configure(participant: str | None = None, log: str | Path | None = None) -> None:
    """For the rest of the session: who is answering, and the JSONL file each :func:`check` appends to
    (``None`` leaves a setting unchanged). The environment variables VRAMLIB_PARTICIPANT and
    VRAMLIB_EXERCISE_LOG do the same without code."""
    if participant is not None:
        _SESSION["who"] = str(participant)
    if log is not None:
        _SESSION["log"] = str(log)


def _number(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise InvalidValueError(field, value, "give a finite number")
    return float(value)


def check(key: str, answer: float, rel_tol: float | None = None, *, who: str | None = None,
          record: bool | str | Path | None = None) -> Result:
    """Compare ``answer`` with the computed one, within ``rel_tol`` (default: the exercise's).

    ``record``: a JSONL path to append the result to; ``None`` (default) uses :func:`configure`'s log or
    $VRAMLIB_EXERCISE_LOG when set; ``False`` never records. ``who`` names the participant in the record
    (default :func:`configure`'s, $VRAMLIB_PARTICIPANT, else ``"anonymous"``).
    """
    ex = _get(key)
    given = _number("answer", answer)
    tol = ex.rel_tol if rel_tol is None else _number("rel_tol", rel_tol)
    if tol < 0:
        raise InvalidValueError("rel_tol", rel_tol, "must be >= 0 (0.01 = 1%)")
    expected = float(ex.answer())
    ok = abs(given - expected) <= tol * abs(expected)
    if ok:
        msg = f"{key}: right ({given:,.6g} {ex.unit}; computed {expected:,.6g} {ex.unit})."
    else:
        side = "high" if given > expected else "low"
        msg = f"{key}: not yet: {given:,.6g} {ex.unit} is too {side} (tolerance {tol:.0%}). Hint: {ex.hint}"
    result = Result(key, ok, given, expected, msg)
    _record(result, tol, who, record)
    return result


def _log_path(record: bool | str | Path | None) -> Path | None:
    if record is False:
        return None
    if record is not None and record is not True:
        return Path(record)
    path = _SESSION["log"] or os.environ.get(LOG_ENV)
    if record is True and not path:
        raise InvalidValueError("record", True, f"no log file: pass a path, call configure(log=...) or set {LOG_ENV}")
    return Path(path) if path else None


def _record(result: Result, tol: float, who: str | None, record: bool | str | Path | None) -> None:
    path = _log_path(record)
    if path is None:
        return
    line = json.dumps({
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "who": who or _SESSION["who"] or os.environ.get(WHO_ENV) or "anonymous",
        "key": result.key, "given": result.given, "expected": result.expected, "correct": result.correct,
        "rel_tol": tol,
    })
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:  # one write per line: appends from several kernels interleave whole lines
            fh.write(line + "\n")
    except OSError as e:
        warnings.warn(f"exercise result not recorded in {path}: {e}", stacklevel=3)


def answer(key: str) -> float:
    """The computed answer (for solutions and tests)."""
    return float(_get(key).answer())


def keys(chapter: str | None = None) -> list[str]:
    """Registered exercise keys, optionally of one chapter (``"ch01"``), in chapter then number order."""
    _load()

    def order(k: str) -> tuple:
        ch, _, n = k.rpartition("-")
        return (ch, int(n) if n.isdigit() else 0, k)

    out = sorted(EXERCISES, key=order)
    if chapter is not None:
        prefix = str(chapter).strip().lower().rstrip("-") + "-"
        out = [k for k in out if k.startswith(prefix)]
    return out


def _table(rows, caption: str = ""):
    from ..core.table import Table

    return Table(rows, caption=caption)


def list_exercises(chapter: str | None = None):
    """A :class:`vramlib.core.table.Table` of the exercises: key, question, unit, tolerance."""
    ks = keys(chapter)
    if not ks:
        raise UnknownNameError("chapter", chapter, sorted({k.rpartition("-")[0] for k in keys()}))
    return _table([{"exercise": k, "question": EXERCISES[k].question, "unit": EXERCISES[k].unit,
                    "tolerance": f"{EXERCISES[k].rel_tol:.0%}"} for k in ks], caption=f"{len(ks)} exercises")


def check_all(answers: Mapping[str, float], rel_tol: float | None = None, *, who: str | None = None,
              record: bool | str | Path | None = None):
    """Check several answers at once; a :class:`vramlib.core.table.Table` (exercise, your answer, unit, result, hint)
    whose caption counts the right ones; ``.results`` holds the :class:`Result` objects. Unknown keys raise
    before anything is checked or recorded."""
    if not isinstance(answers, Mapping) or not answers:
        raise InvalidValueError("answers", answers, "give a dict of exercise key -> number, e.g. {'ch01-1': 31000}")
    for k in answers:
        _get(k)
    results = [check(k, v, rel_tol, who=who, record=record) for k, v in answers.items()]
    rows = [{"exercise": r.key, "your answer": f"{r.given:,.6g}", "unit": EXERCISES[r.key].unit,
             "result": "right" if r.correct else "not yet", "hint": "" if r.correct else EXERCISES[r.key].hint}
            for r in results]
    table = _table(rows, caption=f"{sum(r.correct for r in results)} of {len(results)} right")
    table.results = results
    return table


def read_log(paths: str | Path | Iterable[str | Path]) -> list[dict]:
    """The records of one or more JSONL logs (blank and malformed lines are skipped with a warning)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise InvalidValueError("log", str(path), "no such file")
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict) or "key" not in rec or "correct" not in rec:
                    raise ValueError("missing key/correct")
            except ValueError as e:
                warnings.warn(f"{path}:{i}: skipped a malformed record ({e})", stacklevel=2)
                continue
            out.append(rec)
    return out


def summarize(paths: str | Path | Iterable[str | Path]):
    """Who solved what, from JSONL logs: one row per participant (solved, tried, the keys solved and the keys
    tried but not yet solved), most solved first; a :class:`vramlib.core.table.Table`."""
    records = read_log(paths)
    people: dict[str, dict] = {}
    for rec in records:
        p = people.setdefault(str(rec.get("who", "anonymous")), {"tried": set(), "solved": set(), "last": ""})
        p["tried"].add(rec["key"])
        if rec["correct"]:
            p["solved"].add(rec["key"])
        p["last"] = max(p["last"], str(rec.get("time", "")))

    def ordered(ks: set) -> str:
        rank = {k: i for i, k in enumerate(keys())}
        return ", ".join(sorted(ks, key=lambda k: (rank.get(k, len(rank)), k)))

    rows = [{"participant": who, "solved": len(p["solved"]), "tried": len(p["tried"]),
             "solved exercises": ordered(p["solved"]), "not yet": ordered(p["tried"] - p["solved"]),
             "last check": p["last"]}
            for who, p in sorted(people.items(), key=lambda kv: (-len(kv[1]["solved"]), kv[0]))]
    return _table(rows, caption=f"{len(rows)} participants, {len(records)} checks")
