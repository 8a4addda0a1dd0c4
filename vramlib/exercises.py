"""Self-checking exercises: every answer is computed by vramlib, and ``check`` says right or wrong with a hint.

Used in: every chapter's exercises (and the workshop).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .errors import InvalidValueError, UnknownNameError


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


def register(key: str, question: str, answer: Callable[[], float], unit: str, hint: str, rel_tol: float = 0.01) -> None:
    """Add an exercise (chapters' exercises are registered in :mod:`vramlib.exercise_bank`)."""
    EXERCISES[key] = Exercise(key, question, answer, unit, rel_tol, hint)


def _load() -> None:
    if not EXERCISES:
        from . import exercise_bank  # noqa: F401  (registers on import)


def check(key: str, answer: float, rel_tol: float | None = None) -> Result:
    """Compare ``answer`` with the computed one, within ``rel_tol`` (default: the exercise's)."""
    _load()
    if key not in EXERCISES:
        raise UnknownNameError("exercise", key, EXERCISES)
    ex = EXERCISES[key]
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        raise InvalidValueError("answer", answer, "give a number")
    expected = float(ex.answer())
    tol = ex.rel_tol if rel_tol is None else rel_tol
    ok = abs(answer - expected) <= tol * abs(expected)
    if ok:
        msg = f"{key}: right ({answer:,.6g} {ex.unit}; computed {expected:,.6g} {ex.unit})."
    else:
        side = "high" if answer > expected else "low"
        msg = f"{key}: not yet: {answer:,.6g} {ex.unit} is too {side} (tolerance {tol:.0%}). Hint: {ex.hint}"
    return Result(key, ok, float(answer), expected, msg)


def answer(key: str) -> float:
    """The computed answer (for solutions and tests)."""
    _load()
    if key not in EXERCISES:
        raise UnknownNameError("exercise", key, EXERCISES)
    return float(EXERCISES[key].answer())
