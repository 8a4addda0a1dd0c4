"""What a reader types into the static calculators' number boxes, swept over every chapter's calculator.

Each case types one string into one box of one chapter's live calculator (select-all, type, Tab: as a reader)
and checks that the result area shows either the right number for what was typed -- equal to vramlib's compute
function on that value, as in ``test_calculators`` -- or one line in place (``vramlib-error``, the look of the
Python widgets' messages) that names the field and its allowed range, with the typed text left as typed and the
box marked ``aria-invalid``. Nothing is clamped, rounded or replaced by the last good value. The box is then
set back to the chapter's value: the message must go and the chapter's own result come back. No case may
leave a console error.

A select whose value is not in its list (set by a script, or a chapter value missing from it) says so too, and
the arrow keys step a box by its step without leaving the range.
"""
from __future__ import annotations

import json
import math

import pytest

from .cases import compare, python_result
from .conftest import BUILD
from .test_calculators import READ_JS, calculators_on, console_problems, load

BAD = None
"""The expected reading of a typed string that must be refused (a message in place)."""

TOKEN_INPUTS = [
    ("1e5", 100_000), ("1E5", 100_000), ("100,000", 100_000), ("100_000", 100_000), (" 4096 ", 4096),
    ("1,000,000", 1_000_000), ("+2048", 2048), ("1.0e3", 1000), ("abc", BAD), ("", BAD), ("   ", BAD), ("1e", BAD),
    ("-1", BAD), ("0", BAD), ("1e12", BAD), ("1000000000", BAD), ("2.5", BAD), ("Infinity", BAD), ("NaN", BAD),
    ("nan", BAD), ("4k", BAD), ("128K", BAD), ("1,00", BAD), ("0x10", BAD),
]
"""Typed into every chapter's token/sequence box (a count; the reading is checked against the box's range)."""

FIELD = {
    "ch01-13b-on-24gb": "tokens", "ch02-qlora-33b-on-48gb": "seq", "ch03-full-finetune-8xa100": "seq",
    "ch04-train-7b-on-4xv100": "seq", "ch05-quantized-on-rtx4090": "tokens", "ch06-cloud-gpu-choice": "request_tokens",
    "ch07-100k-context": "tokens", "ch08-vllm-vs-nvidia-smi": "max_num_batched_tokens",
    "ch09-finetune-gpu-config": "seq", "ch10-1b-vs-7b-linearity": "seq", "ch11-pipeline-balance": "seq",
    "ch12-tp-pp-dp-design": "seq", "ch13-design-for-memory": "context", "ch14-bookshelf": "tokens",
    "ch15-inference-vs-training": "seq",
}
"""Each chapter's token count box."""

OTHER_INPUTS = [
    ("ch01-13b-on-24gb", "batch", "2.5", BAD), ("ch01-13b-on-24gb", "batch", "4,096", 4096),
    ("ch01-13b-on-24gb", "batch", "5000", BAD), ("ch01-13b-on-24gb", "n_kv_heads", "1e1", 10),
    ("ch01-13b-on-24gb", "n_heads", "0", BAD), ("ch05-quantized-on-rtx4090", "n_kv_heads", "8.0", 8),
    ("ch03-full-finetune-8xa100", "pp", "61", BAD), ("ch03-full-finetune-8xa100", "dp", "1e4", 10_000),
    ("ch04-train-7b-on-4xv100", "micro_batch", "1.5", BAD), ("ch02-qlora-33b-on-48gb", "lora_rank", "64", 64),
    ("ch02-qlora-33b-on-48gb", "lora_rank", "1e4", BAD),
    ("ch06-cloud-gpu-choice", "gpu_memory_utilization", "0.8", 0.8),
    ("ch06-cloud-gpu-choice", "gpu_memory_utilization", "8e-1", 0.8),
    ("ch06-cloud-gpu-choice", "gpu_memory_utilization", " .5 ", 0.5),
    ("ch06-cloud-gpu-choice", "gpu_memory_utilization", "1", 1.0),
    ("ch06-cloud-gpu-choice", "gpu_memory_utilization", "0,9", BAD),
    ("ch06-cloud-gpu-choice", "gpu_memory_utilization", "90%", BAD),
    ("ch06-cloud-gpu-choice", "gpu_memory_utilization", "1.5", BAD),
    ("ch06-cloud-gpu-choice", "gpu_memory_utilization", "0.04", BAD),
    ("ch06-cloud-gpu-choice", "gpu_memory_utilization", "Infinity", BAD),
    ("ch08-vllm-vs-nvidia-smi", "request_tokens", "3e6", BAD),
    ("ch09-finetune-gpu-config", "headroom_pct", "0", 0), ("ch09-finetune-gpu-config", "headroom_pct", "99", 99),
    ("ch09-finetune-gpu-config", "headroom_pct", "100", BAD), ("ch09-finetune-gpu-config", "headroom_pct", "12.5", BAD),
    ("ch11-pipeline-balance", "pp", "8", 8), ("ch11-pipeline-balance", "pp", "81", BAD),
    ("ch11-pipeline-balance", "virtual_stages", "17", BAD), ("ch12-tp-pp-dp-design", "n_micro", "1.6e1", 16),
    ("ch13-design-for-memory", "n_layers", "2.5", BAD), ("ch13-design-for-memory", "n_layers", "48", 48),
    ("ch13-design-for-memory", "hidden", "32", BAD), ("ch13-design-for-memory", "n_experts", "0", 0),
    ("ch13-design-for-memory", "n_experts", "-0", 0), ("ch13-design-for-memory", "n_experts", "-1", BAD),
    ("ch13-design-for-memory", "n_gpus", "1e5", 100_000), ("ch13-design-for-memory", "n_gpus", "1e6", BAD),
    ("ch14-bookshelf", "batch", "NaN", BAD), ("ch14-bookshelf", "n_kv_heads", "", BAD),
    ("ch15-inference-vs-training", "micro_batch", "2", 2),
]
"""Other boxes: heads, batch sizes, layers, a fraction, a percentage, a box whose range starts at 0."""

CASES = ([(page, field, text, want) for page, field in FIELD.items() for text, want in TOKEN_INPUTS]
         + OTHER_INPUTS)
assert len(CASES) >= 60


def _id(case) -> str:
    page, field, text, _ = case
    return f"{page[:4]}-{field}-{text!r}"


_SHOWN = {"page": None}


def _calc(driver, stem: str):
    """The chapter's live calculator, loaded once for all of its cases (reloaded if a case left it unclean)."""
    page = BUILD / "book" / f"{stem}.html"
    dirty = _SHOWN["page"] == stem and driver.execute_script(
        "return !!document.querySelector('.vramlib-calc .vramlib-error, .vramlib-calc [aria-invalid]')")
    if _SHOWN["page"] != stem or dirty:
        load(driver, page)
        _SHOWN["page"] = stem
        driver.get_log("browser")
    live = [el for el in calculators_on(driver) if el.get_attribute("data-live") == "1"]
    assert live, f"{stem}: no live calculator"
    return live[0]


def _type(driver, el, name: str, text: str):
    """Select-all, type, Tab: what a reader does."""
    from selenium.webdriver.common.keys import Keys

    box = el.find_element("css selector", f'[data-name="{name}"]')
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    box.send_keys(text, Keys.TAB)
    return box


def _range(spec: dict) -> str:
    f = (lambda x: f"{x:,}") if spec["kind"] == "int" else (lambda x: f"{x:g}")
    return f"from {f(spec['min'])} to {f(spec['max'])}"


def _accepted(spec: dict, want) -> bool:
    return (want is not BAD and spec["min"] <= want <= spec["max"]
            and (spec["kind"] != "int" or float(want).is_integer()) and math.isfinite(want))


def _check_result(calc: str, fixed: dict, values: dict, js: dict, what: str) -> None:
    py = python_result(calc, fixed, values)
    assert not js.get("missing"), f"{what}: no output"
    diffs = compare(py, js)
    assert not diffs, f"{what}: " + "; ".join(diffs)


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_typed_input(driver, build_dir, case):
    stem, name, text, want = case
    el = _calc(driver, stem)
    calc = el.get_attribute("data-calc")
    fixed = json.loads(el.get_attribute("data-fixed"))
    specs = json.loads(el.get_attribute("data-controls"))
    spec = next(s for s in specs if s["name"] == name)
    defaults = {s["name"]: s["value"] for s in specs}
    box = _type(driver, el, name, text)
    js = driver.execute_script(READ_JS, el)
    assert box.get_attribute("value") == text, f"the box's text was changed from {text!r} to {box.get_attribute('value')!r}"
    if _accepted(spec, want):
        value = int(want) if spec["kind"] == "int" else float(want)
        assert box.get_attribute("aria-invalid") is None, f"{text!r} marked invalid"
        _check_result(calc, fixed, {**defaults, name: value}, js, f"{stem} {name}={text!r} (read as {value})")
    else:
        msg = js.get("error")
        assert msg, f"{stem} {name}={text!r}: no message, the page shows {js}"
        assert "\n" not in msg and len(msg) < 300, f"not one line: {msg!r}"
        assert msg.startswith(f"{spec['label']}: "), f"the message does not name the field {spec['label']!r}: {msg!r}"
        assert _range(spec) in msg, f"the message does not give the range {_range(spec)!r}: {msg!r}"
        assert "internal error" not in msg, msg
        assert box.get_attribute("aria-invalid") == "true", "the bad box is not marked"
        assert not el.find_elements("css selector", ".vramlib-calc-out table, .vramlib-calc-out svg"), \
            "a result is still shown next to the message"
    # fixed again: the chapter's value brings the chapter's result back and the message goes
    _type(driver, el, name, str(spec["value"]))
    js = driver.execute_script(READ_JS, el)
    assert "error" not in js or python_result(calc, fixed, defaults).get("error") == js["error"], \
        f"after fixing {name}: {js.get('error')}"
    assert box.get_attribute("aria-invalid") is None, "the fixed box is still marked"
    _check_result(calc, fixed, defaults, js, f"{stem} {name} set back to {spec['value']}")
    problems, _ = console_problems(driver.get_log("browser"))
    assert not problems, problems


SELECTS = ["ch01-13b-on-24gb", "ch06-cloud-gpu-choice", "ch12-tp-pp-dp-design", "ch14-bookshelf", "ch16-validation"]


@pytest.mark.parametrize("stem", SELECTS)
def test_a_select_value_not_in_its_list_is_said(driver, build_dir, stem):
    """A select left with no option (a script sets a value not in its list) says so; it is never read as the first."""
    from selenium.webdriver.support.ui import Select

    el = _calc(driver, stem)
    calc = el.get_attribute("data-calc")
    fixed, specs = json.loads(el.get_attribute("data-fixed")), json.loads(el.get_attribute("data-controls"))
    spec = next(s for s in specs if s["kind"] == "select")
    driver.execute_script("""const s = arguments[0].querySelector('[data-name="' + arguments[1] + '"]');
      s.value = '999'; s.dispatchEvent(new Event('change', {bubbles: true}));""", el, spec["name"])
    js = driver.execute_script(READ_JS, el)
    assert js.get("error", "").startswith(f"{spec['label']}: nothing chosen;"), js
    ctl = el.find_element("css selector", f'[data-name="{spec["name"]}"]')
    assert ctl.get_attribute("aria-invalid") == "true"
    Select(ctl).select_by_index(spec["options"].index(spec["value"]))
    js = driver.execute_script(READ_JS, el)
    assert ctl.get_attribute("aria-invalid") is None
    _check_result(calc, fixed, {s["name"]: s["value"] for s in specs}, js, f"{stem}: {spec['name']} chosen again")
    problems, _ = console_problems(driver.get_log("browser"))
    assert not problems, problems


def test_arrow_keys_step_within_the_range(driver, build_dir):
    """ArrowUp/ArrowDown step a box by its step (as the number box did) and stop at the bounds, never past them."""
    from selenium.webdriver.common.keys import Keys

    el = _calc(driver, "ch01-13b-on-24gb")
    fixed, specs = json.loads(el.get_attribute("data-fixed")), json.loads(el.get_attribute("data-controls"))
    spec = next(s for s in specs if s["name"] == "tokens")
    box = el.find_element("css selector", '[data-name="tokens"]')
    box.send_keys(Keys.ARROW_UP)
    assert box.get_attribute("value") == str(spec["value"] + spec["step"])
    _check_result("inference", fixed, {**{s["name"]: s["value"] for s in specs}, "tokens": spec["value"] + spec["step"]},
                  driver.execute_script(READ_JS, el), "after ArrowUp")
    _type(driver, el, "tokens", str(spec["max"]))
    box.send_keys(Keys.ARROW_UP)
    assert box.get_attribute("value") == str(spec["max"]), "ArrowUp went past the maximum"
    _type(driver, el, "tokens", str(spec["value"]))
    assert "error" not in driver.execute_script(READ_JS, el)
