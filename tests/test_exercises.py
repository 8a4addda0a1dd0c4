"""vramlib.workshop.exercises: every registered exercise checks right and wrong answers, results can be recorded and
summarised, and every chapter's exercises are registered and used by its notebook."""
from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import vramlib as vl
from vramlib import exercises as ex
from vramlib.core.errors import InvalidValueError, UnknownNameError

BOOK = Path(__file__).resolve().parents[1] / "book"
NOTEBOOKS = sorted(BOOK.glob("ch[0-9][0-9]*.ipynb"))
ALL = ex.keys()


@pytest.fixture(autouse=True)
def _no_session_log(monkeypatch):
    """Tests never inherit a workshop log or participant."""
    monkeypatch.delenv(ex.LOG_ENV, raising=False)
    monkeypatch.delenv(ex.WHO_ENV, raising=False)
    monkeypatch.setitem(ex._SESSION, "who", None)
    monkeypatch.setitem(ex._SESSION, "log", None)


def test_keys_are_chapter_numbered():
    assert ALL, "no exercises registered"
    for k in ALL:
        assert re.fullmatch(r"ch\d\d[a-z]?-\d+", k), k
    assert ex.keys("ch01") == ["ch01-1", "ch01-2", "ch01-3"]


@pytest.mark.parametrize("key", ALL)
def test_every_exercise_checks_right_and_wrong(key):
    e = ex.EXERCISES[key]
    a = ex.answer(key)
    assert math.isfinite(a) and a > 0, (key, a)
    assert e.question.strip() and e.unit and e.hint and 0 <= e.rel_tol < 0.5
    right = ex.check(key, a)
    assert right.correct and "right" in str(right) and "\n" not in str(right)
    high, low = ex.check(key, a * (1 + 3 * e.rel_tol) + 1), ex.check(key, a * (1 - 3 * e.rel_tol) - 1)
    assert not high.correct and "too high" in str(high) and e.hint in str(high)
    assert not low.correct and "too low" in str(low)
    assert f"{a:,.6g}" not in str(high)  # a wrong answer gets a hint, not the answer


def test_tolerance_override_and_number_types():
    a = ex.answer("ch07-1")
    assert not ex.check("ch07-1", a * 1.05).correct
    assert ex.check("ch07-1", a * 1.05, rel_tol=0.1).correct
    assert ex.check("ch07-1", np.float64(a)).correct
    assert ex.check("ch01-1", np.int64(round(ex.answer("ch01-1")))).correct
    assert ex.check("ch01-1", Fraction(round(ex.answer("ch01-1")))).correct
    assert ex.check("ch07-1", a)._repr_html_().startswith("<span")


@pytest.mark.parametrize("bad", ["31000", True, None, float("nan"), float("inf"), [1]])
def test_bad_answers(bad):
    with pytest.raises(InvalidValueError, match="answer"):
        ex.check("ch01-1", bad)


def test_bad_keys_and_tolerance():
    with pytest.raises(UnknownNameError, match="did you mean 'ch01-1'"):
        ex.check("ch01_1", 1)
    with pytest.raises(UnknownNameError):
        ex.answer("ch99-9")
    with pytest.raises(InvalidValueError, match="rel_tol"):
        ex.check("ch01-1", 1, rel_tol=-0.1)


def test_check_all_table():
    good = ex.answer("ch07-1")
    table = ex.check_all({"ch07-1": good, "ch07-2": ex.answer("ch07-2") + 10})
    assert table.caption == "1 of 2 right"
    assert [r["result"] for r in table.rows] == ["right", "not yet"]
    assert table.rows[1]["hint"] == ex.EXERCISES["ch07-2"].hint and table.rows[0]["hint"] == ""
    assert [r.correct for r in table.results] == [True, False]
    assert "<table" in table._repr_html_()
    with pytest.raises(InvalidValueError):
        ex.check_all({})


def test_record_to_a_path_and_summarize(tmp_path):
    log = tmp_path / "logs" / "answers.jsonl"
    ex.check("ch01-1", ex.answer("ch01-1"), who="ann", record=log)
    ex.check("ch01-2", 1.0, who="ann", record=log)
    ex.check("ch01-2", 1.0, who="bo", record=log)
    ex.check("ch01-2", 1.0, record=False)  # never recorded
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(r["who"], r["key"], r["correct"]) for r in lines] == [
        ("ann", "ch01-1", True), ("ann", "ch01-2", False), ("bo", "ch01-2", False)]
    assert set(lines[0]) == {"time", "who", "key", "given", "expected", "correct", "rel_tol"}
    table = ex.summarize(log)
    assert table.rows[0] == {"participant": "ann", "solved": 1, "tried": 2, "solved exercises": "ch01-1",
                             "not yet": "ch01-2", "last check": lines[1]["time"]}
    assert table.rows[1]["participant"] == "bo" and table.rows[1]["solved"] == 0
    assert table.caption == "2 participants, 3 checks"


def test_record_from_environment_and_configure(tmp_path, monkeypatch):
    env_log = tmp_path / "env.jsonl"
    monkeypatch.setenv(ex.LOG_ENV, str(env_log))
    monkeypatch.setenv(ex.WHO_ENV, "cai")
    ex.check("ch07-1", 1.0)
    assert json.loads(env_log.read_text())["who"] == "cai"
    conf_log = tmp_path / "conf.jsonl"
    ex.configure(participant="dee", log=conf_log)
    ex.check_all({"ch07-1": 1.0, "ch07-2": 2.0})
    assert [json.loads(x)["who"] for x in conf_log.read_text().splitlines()] == ["dee", "dee"]
    assert len(env_log.read_text().splitlines()) == 1
    with pytest.raises(UnknownNameError):  # an unknown key records nothing
        ex.check_all({"ch07-1": 1.0, "nope-1": 2.0})
    assert len(conf_log.read_text().splitlines()) == 2


def test_record_true_needs_a_log():
    with pytest.raises(InvalidValueError, match="no log file"):
        ex.check("ch01-1", 1, record=True)


def test_summarize_skips_malformed_lines(tmp_path):
    log = tmp_path / "a.jsonl"
    log.write_text('{"who": "ann", "key": "ch01-1", "correct": true}\nnot json\n\n{"who": "x"}\n')
    with pytest.warns(UserWarning, match="malformed"):
        table = ex.summarize([log])
    assert len(table.rows) == 1 and table.rows[0]["solved"] == 1
    with pytest.raises(InvalidValueError, match="no such file"):
        ex.summarize(tmp_path / "missing.jsonl")


def test_list_exercises():
    table = ex.list_exercises("ch07")
    assert [r["exercise"] for r in table.rows] == ["ch07-1", "ch07-2", "ch07-3"]
    assert len(ex.list_exercises().rows) == len(ALL)
    with pytest.raises(UnknownNameError, match="chapter"):
        ex.list_exercises("ch99")


def test_public_api_kept():
    assert vl.exercises.check is ex.check and callable(ex.register) and ex.Result.__name__ == "Result"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_chapter_uses_its_registered_exercises(path):
    """Each chapter has at least two registered exercises, checks them with vl.exercises.check, and every key its
    notebook names is registered."""
    chapter = path.stem[:4]
    nb = json.loads(path.read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"])
    assert "exercises.check(" in text, f"{path.stem}: no vl.exercises.check call"
    named = set(re.findall(r"(ch\d\d[a-z]?-\d+)", text))
    unknown = {k for k in named if k.startswith(chapter) and k not in ex.EXERCISES}
    assert not unknown, f"{path.stem}: unregistered exercise keys {sorted(unknown)}"
    assert len(ex.keys(chapter)) >= 2, f"{chapter}: fewer than two registered exercises"
