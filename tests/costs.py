"""Cost by counting, for the tests that used to time themselves (timings live in tools/bench*.py).

``with counting() as c: ...`` records what the block did: ``c.lambdify`` (sympy.lambdify compilations,
vramlib.core.formulas.LAMBDIFY_CALLS), ``c.solves`` (sympy.solve calls), ``c.evaluations`` (formulas.evaluate calls),
``c.weights_misses`` (misses of the weights_detail cache). These are the slow steps of a cold call: a warm widget
update must do none of the first two and the same number of evaluations every time.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import sympy

from vramlib import formulas as F
from vramlib import inference as I


@dataclass
class Cost:
    lambdify: int = 0
    solves: int = 0
    evaluations: int = 0
    weights_misses: int = 0

    @property
    def compiles(self) -> int:
        """sympy work a warm call must not do: lambdify compilations and solves."""
        return self.lambdify + self.solves


@contextmanager
def counting():
    cost = Cost()
    solve = sympy.solve

    def counted_solve(*args, **kwargs):
        cost.solves += 1
        return solve(*args, **kwargs)

    lam, ev, wm = F.LAMBDIFY_CALLS, F.EVALUATIONS, I._weights_detail.cache_info().misses
    sympy.solve = counted_solve  # vramlib calls sp.solve through the module
    try:
        yield cost
    finally:
        sympy.solve = solve
        cost.lambdify = F.LAMBDIFY_CALLS - lam
        cost.evaluations = F.EVALUATIONS - ev
        cost.weights_misses = I._weights_detail.cache_info().misses - wm


def warm_cost(fn, *args, **kwargs) -> Cost:
    """Cost of ``fn(*args, **kwargs)`` once warmed up by one identical call."""
    fn(*args, **kwargs)
    with counting() as cost:
        fn(*args, **kwargs)
    return cost


def assert_warm_updates_compile_nothing(update, misses_allowed: int = 0, **changes) -> Cost:
    """A panel update, once warm: compiles nothing, misses no cache, repeats the same work exactly, and with other
    numbers (``changes``) still compiles nothing (``misses_allowed`` weights_detail misses for a new shape)."""
    cost = warm_cost(update)
    assert cost.compiles == 0 and cost.weights_misses == 0 and cost.evaluations > 0, cost
    with counting() as again:
        update()
    assert again == cost                                    # the same work every time: nothing accumulates
    with counting() as moved:                               # other numbers: the same compiled formulas
        update(**changes)
    assert moved.compiles == 0 and moved.weights_misses <= misses_allowed, moved
    return cost


def count_calls(monkeypatch, module, name: str) -> list:
    """Wrap ``module.name`` (looked up at call time by the code under test) so that each call appends to the
    returned list: ``len(calls)`` is how many times it ran."""
    calls: list = []
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls
