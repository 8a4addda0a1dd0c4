"""The cost counters of tests/costs.py count: the tests that assert on them would otherwise pass vacuously."""
import sympy as sp

import vramlib as vl
from vramlib import formulas as F
from vramlib.core.symbols import L, h
from costs import counting, warm_cost


def test_a_new_expression_is_compiled_once():
    expr = 12345 * L * h**2 + 678 * h                    # no vramlib formula: its first evaluation lambdifies
    with counting() as cold:
        assert F.evaluate(expr, L=2, h=3) == 12345 * 18 + 678 * 3
    assert (cold.lambdify, cold.evaluations) == (1, 1), cold
    with counting() as warm:
        F.evaluate(expr, L=5, h=7)
    assert (warm.lambdify, warm.evaluations) == (0, 1), warm


def test_solves_and_weights_misses_are_counted():
    with counting() as cost:
        sp.solve(sp.Eq(L * h, 6), L)
        vl.weights_detail(vl.get_model("llama-2-7b").with_(name="cost-counter-probe"), "q4_k_m")  # a new model
    assert cost.solves == 1 and cost.weights_misses == 1 and cost.compiles >= 1, cost
    assert warm_cost(vl.weights_detail, "llama-2-7b", "q4_k_m").weights_misses == 0
