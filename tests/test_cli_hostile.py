"""A hostile sweep of the `vramlib` command line and of the participants CSV, with a regression test for every
bug it found.

Rules checked: bad input exits 2 with exactly one line on stderr that names the option (or the CSV column / row),
never a traceback; a value is never silently replaced by a default ('--tokens 0'); only the project's errors
become exit 2 (anything else is a bug and propagates); a batch of reports loses nothing when one row is bad; and
no user string reaches a generated HTML page unescaped.

The sweep runs the CLI in process (``cli.main``) with papermill switched off, so a bad ``report`` input that got
past validation would fail loudly instead of starting a kernel. One test runs papermill for real (a batch of one
good row and several bad ones), two run the installed entry point in a subprocess.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vramlib import cli, report as R
from vramlib.core.errors import VramlibError

ROOT = Path(__file__).resolve().parents[1]
HOSTILE_NAME = '<script>alert(1)</script> & "Bob"'


def run(argv, capsys) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture()
def no_kernel(monkeypatch, tmp_path):
    """Work in a scratch folder, and make any papermill run an error: bad input must stop before a kernel starts."""
    import papermill

    def refuse(*a, **k):
        raise AssertionError("papermill was started for a bad input")

    monkeypatch.setattr(papermill, "execute_notebook", refuse)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- the sweep: every subcommand with bad arguments ------------------------------------------------------------
M7, GPU = ["--model", "llama-2-7b"], ["--gpu", "rtx-4090"]
BASE = {
    "fit": ["fit", *M7, *GPU],
    "fit-lora": ["fit", *M7, *GPU, "--task", "lora"],
    "fit-train": ["fit", *M7, *GPU, "--task", "train"],
    "max-context": ["max-context", *M7, *GPU],
    "plan": ["plan", *M7, "--gpu", "8xa100-80gb"],
    "report": ["report", *GPU, "--model", "llama-3.1-8b"],
}
BAD_INTS = ["0", "-1", "nan", "inf", "1e999", "2.5", "x", ""]
INT_OPTIONS = [
    ("fit", ["--tokens", "--seq", "--batch", "--heads", "--kv-heads", "--prefill-chunk"]),
    ("fit-lora", ["--lora-rank"]),
    ("max-context", ["--tokens", "--batch", "--heads", "--kv-heads", "--prefill-chunk"]),
    ("plan", ["--seq", "--global-batch", "--gpus-per-node", "--top", "--heads"]),
    ("report", ["--tokens", "--batch", "--seq", "--lora-rank", "--timeout"]),
]
CASES: list[tuple[list[str], str]] = [
    (BASE[cmd] + [opt, v], opt) for cmd, opts in INT_OPTIONS for opt in opts for v in BAD_INTS
]
CASES += [(BASE["plan"] + ["--headroom", v], "--headroom") for v in ["1", "-0.1", "1.5", "nan", "inf", "1e999", "x"]]
CASES += [(BASE["plan"] + ["--mfu", v], "--mfu") for v in ["0", "-0.1", "1.01", "nan", "inf", "x"]]
CASES += [(BASE["plan"] + ["--zero", v], "--zero") for v in ["4", "-1", "", ",", "1,,2", "x", "1.5"]]
CASES += [(BASE["plan"] + ["--micro-batches", v], "--micro-batches") for v in ["0", "-2", "", ",", "x", "1,0"]]
CASES += [(BASE["plan"] + ["--recompute", v], "recompute") for v in ["", ",", "none,,", "most", "none,most"]]
CASES += [(BASE["plan"] + ["--top", "99999999999999999999999999", "--gpu", "a100-80gb", "--mfu", "0"], "--mfu")]
CASES += [(BASE[cmd] + ["--reserve", v], "--reserve") for cmd in ("fit", "max-context", "plan")
          for v in ["500", "lots", "", "nanGB", "1e999GB", "-1GB"]]
CASES += [(["fit", *M7, "--gpu", v], "gpu") for v in ["", " ", "24", "2x24", "0x80GB", "2x0GB", "-2x80GB", "rtx-409",
                                                       "80XB", "2x", "2000000x80GB", "1e999GB", "nanGB", "3xa100-80gb"]]
CASES += [(["max-context", *M7, "--gpu", v], "gpu") for v in ["", "24", "0xrtx-4090", "rtx-409"]]
CASES += [(["plan", *M7, "--gpu", v], "gpu") for v in ["8x80GB", "0xa100-80gb", "99999999999999xa100-80gb", "a10O"]]
CASES += [(["fit", "--model", v, *GPU], "model") for v in ["", " ", "llama-2-13", "missing/config.json", "/dev/null"]]
CASES += [
    (BASE["fit"] + ["--weights", ""], "weights"), (BASE["fit"] + ["--weights", "int3"], "weights"),
    (BASE["fit"] + ["--kv-dtype", ""], "kv_dtype"), (BASE["fit"] + ["--kv-dtype", "fp7"], "kv_dtype"),
    (BASE["fit"] + ["--attention", ""], "attention"), (BASE["fit"] + ["--attention", "fast"], "attention"),
    (BASE["fit-train"] + ["--precision", "int8"], "precision"), (BASE["fit-train"] + ["--optimizer", "adam"], "optimizer"),
    (BASE["fit-train"] + ["--convention", "x"], "convention"), (BASE["fit-train"] + ["--recompute", "some"], "recompute"),
    (BASE["fit-train"] + ["--activation-style", "foo"], "activation_style"),
    (BASE["fit-lora"] + ["--lora-targets", "foo"], "lora_targets"),
    (BASE["fit-lora"] + ["--lora-rank", "99999999999999999999"], "lora_rank"),
    (BASE["fit"] + ["--task", "serve"], "--task"), (BASE["fit"] + ["--method", "sft"], "--method"),
    # options of the other task are refused, not silently ignored
    (BASE["fit"] + ["--precision", "fp32"], "--precision"), (BASE["fit"] + ["--optimizer", "sgd"], "--optimizer"),
    (BASE["fit"] + ["--recompute", "full"], "--recompute"), (BASE["fit"] + ["--lora-rank", "8"], "--lora-rank"),
    (BASE["fit"] + ["--convention", "deepspeed"], "--convention"),
    (BASE["fit-train"] + ["--kv-dtype", "int8"], "--kv-dtype"), (BASE["fit-train"] + ["--prefill-chunk", "512"], "--prefill-chunk"),
    (BASE["fit-train"] + ["--lora-rank", "8"], "--lora-rank"), (BASE["fit-train"] + ["--lora-targets", "qv"], "--lora-targets"),
    (BASE["fit"] + ["--task", "lora", "--method", "qlora"], "--method"), (BASE["fit"] + ["--method", "lora"], "--method"),
    (BASE["fit-train"] + ["--attention", "none"], "--attention"), (BASE["fit-train"] + ["--weights", "int4"], "--weights"),
    (BASE["fit"] + ["--bogus"], "--bogus"), (["fit", *GPU], "--model"), (["fit", *M7], "--gpu"),
    (BASE["max-context"] + ["--weights", ""], "weights"), (BASE["max-context"] + ["--kv-heads", "7"], "kv_heads"),
    (BASE["plan"] + ["--precision", "int8"], "precision"), (BASE["plan"] + ["--optimizer", "adam"], "optimizer"),
    (BASE["plan"] + ["--convention", "x"], "convention"), (BASE["plan"] + ["--kv-heads", "3"], "kv_heads"),
    # report: bad knobs, bad combinations, bad paths (none may start a kernel)
    (BASE["report"] + ["--task", "serve"], "task"), (BASE["report"] + ["--weights", "int3"], "weights"),
    (BASE["report"] + ["--weights", ""], "weight_formats"), (BASE["report"] + ["--kv-dtype", "fp7"], "kv_dtype"),
    (BASE["report"] + ["--recompute", "most"], "recompute"), (["report", "--gpu", "rtx-409", "--model", "llama-3.1-8b"], "gpu"),
    (["report", *GPU, "--model", "llama-2-9b"], "model"), (["report", *GPU, "--model", ""], "models"),
    (BASE["report"] + ["--name", ""], "name"), (BASE["report"] + ["--name", "   "], "name"),
    (BASE["report"] + ["--name", "Ann\nLee"], "name"), (BASE["report"] + ["--name", "x" * 201], "name"),
    (BASE["report"] + ["--out", ""], "--out"), (BASE["report"] + ["--out", "."], "out"),
    (BASE["report"] + ["--notebook", ""], "--notebook"), (BASE["report"] + ["--out-dir", "x"], "--out-dir"),
    (["report", "--model", "llama-3.1-8b"], "--gpu"), (["report", *GPU], "--model"),
    (["report", "--participants", "p.csv", *GPU], "--participants"),
    (["report", "--participants", "p.csv", "--name", "Ann"], "--participants"),
    (["report", "--participants", "p.csv", "--out", "a.html"], "--participants"),
    (["report", "--participants", "p.csv", "--notebook", "a.ipynb"], "--participants"),
    (["report", "--participants", ""], "--participants"), (["report", "--participants", "nope.csv"], "participants"),
    (["report", "--participants", "."], "participants"), (["report", "--participants", "/dev/null"], "participants"),
    (["report", "--participants", "p.csv", "--task", "serve"], "task"),
    (["report", "--participants", "p.csv", "--weights", "int3"], "--weights"),
    (["report", "--participants", "p.csv", "--kv-dtype", "fp7"], "--kv-dtype"),
    (["report", "--participants", "p.csv", "--recompute", "most"], "--recompute"),
    (["report", "--participants", "p.csv", "--timeout", "0"], "--timeout"),
    (["report", "--participants", "p.csv", "--timeout", "100000"], "--timeout"),
    # catalogues and exercises
    (["models", "--filter", "no-such-model"], "model"), (["models", "--bogus"], "--bogus"), (["gpus", "--bogus"], "--bogus"),
    (["exercises", "frob"], "action"), (["exercises", "check", "ch01-1"], "KEY ANSWER"),
    (["exercises", "check", "ch01-1", "lots"], "answer"), (["exercises", "check", "ch01-1", "nan"], "answer"),
    (["exercises", "check", "ch01-1", "inf"], "answer"), (["exercises", "check", "ch01-1", "1e999"], "answer"),
    (["exercises", "check", "ch99-1", "3"], "exercise"), (["exercises", "check", "ch01-1", "1", "--csv"], "--csv"),
    (["exercises", "list", "--who", "ann"], "--who"), (["exercises", "list", "extra"], "list"),
    (["exercises", "list", "--chapter", ""], "chapter"), (["exercises", "list", "--chapter", "ch99"], "chapter"),
    (["exercises", "summary"], "summary"), (["exercises", "summary", "--chapter", "ch01", "x"], "--chapter"),
    (["exercises", "summary", "nope.jsonl"], "log"), (["exercises", "summary", "."], "log"),
    (["exercises", "check", "ch01-1", "1", "--log", ""], "--log"),
    (["frob"], "frob"), ([], "command"),
]
CASES += [(["exercises", "check", "ch01-1", "1", "--rel-tol", v], "--rel-tol") for v in ["-1", "nan", "inf", "x"]]


@pytest.mark.parametrize("argv,option", CASES, ids=[" ".join(a)[:90] or "no-command" for a, _ in CASES])
def test_sweep_bad_input_is_one_line_naming_the_option(argv, option, no_kernel, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 2, (rc, out, err)
    assert out == "", out
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    norm = lambda s: s.replace("-", "_").lower()  # noqa: E731  ('--kv-heads' is named 'kv_heads' by the library)
    assert norm(option.lstrip("-")) in norm(err), (option, err)


def test_sweep_is_large():
    assert len(CASES) >= 250


# --- regressions: each example of the sweep ---------------------------------------------------------------------
@pytest.mark.parametrize("argv", [BASE["fit"], BASE["fit-train"], BASE["max-context"]])
def test_zero_tokens_is_refused_not_replaced_by_the_default(argv, capsys):
    """Was: 'fit --tokens 0' silently computed 4,096 tokens (train: 2,048); max-context ignored the target 0."""
    rc, out, err = run(argv + ["--tokens", "0"], capsys)
    assert (rc, out) == (2, "") and "--tokens" in err and "got 0" in err and err.count("\n") == 1


def test_small_values_are_used_as_given(capsys):
    rc, out, _ = run(BASE["fit"] + ["--tokens", "1", "--json"], capsys)
    assert rc == 0 and json.loads(out)["settings"]["tokens"] == 1
    rc, out, _ = run(BASE["fit-train"] + ["--seq", "1", "--json"], capsys)
    assert json.loads(out)["settings"]["seq"] == 1
    rc, out, _ = run(BASE["max-context"] + ["--tokens", "1"], capsys)
    assert rc == 0 and out.splitlines()[-1] == "Target 1 tokens: fits."


def test_empty_weights_is_refused_not_fp16(capsys):
    """Was: '--weights ""' silently meant fp16."""
    rc, out, err = run(BASE["fit"] + ["--weights", ""], capsys)
    assert rc == 2 and "weights: unknown name ''" in err


def test_inference_refuses_training_options(capsys):
    """Was: 'fit --precision fp32' (inference) silently computed fp16 weights; --optimizer etc. were ignored."""
    rc, out, err = run(BASE["fit"] + ["--precision", "fp32"], capsys)
    assert rc == 2 and "--precision is for --task train" in err
    rc, out, err = run(BASE["fit"] + ["--task", "lora", "--method", "qlora"], capsys)
    assert rc == 2 and "disagree" in err


def test_plan_top_must_be_at_least_one(capsys):
    """Was: 'plan --top 0' printed '387 of 480 plans fit' and then 'No plan fits' (exit 1)."""
    rc, out, err = run(BASE["plan"] + ["--top", "0"], capsys)
    assert (rc, out) == (2, "") and "argument --top: got 0; must be a positive integer" in err
    rc, out, err = run(BASE["plan"] + ["--top", "1", "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and len(data["plans"]) == 1 and data["n_fitting"] >= 1


def test_plan_micro_batches_zero_no_longer_divides_by_zero(capsys):
    """Was: ZeroDivisionError traceback (planning.search_plans does not check micro_batches); '-2' gave
    '0 of 120 plans fit' and '' gave '0 of 0'."""
    for v in ("0", "-2", ""):
        rc, out, err = run(BASE["plan"] + ["--micro-batches", v], capsys)
        assert (rc, out) == (2, "") and "--micro-batches" in err and err.count("\n") == 1


def test_huge_gpu_count_is_refused_quickly(capsys):
    """Was: 'plan --gpu 99999999999999xa100-80gb' hung (the plan search lists the divisors one by one)."""
    rc, out, err = run(["plan", *M7, "--gpu", "99999999999999xa100-80gb"], capsys)
    assert rc == 2 and "at most 1,000,000" in err


def test_empty_model_is_not_the_current_folder(capsys):
    """Was: '--model ""' looked for ./config.json (Path('') is the current folder)."""
    rc, out, err = run(["fit", "--model", "", *GPU], capsys)
    assert rc == 2 and "model: unknown name ''" in err


def test_unitless_sizes_read_well(capsys):
    rc, out, err = run(BASE["fit"] + ["--reserve", "500"], capsys)
    assert rc == 2 and "--reserve: got '500'; a size needs a unit: did you mean '500GB'" in err
    rc, out, err = run(["fit", *M7, "--gpu", "24"], capsys)
    assert rc == 2 and "did you mean '24GB' (10^9 bytes) or '24GiB'" in err


def test_report_name_cannot_escape_the_folder(no_kernel, monkeypatch, capsys):
    """Was: '--name ../../x' wrote report-../../x.html (two folders up); '--name ""' wrote report-.html;
    '--timeout 0' and '--timeout -1' were passed to papermill."""
    seen = []
    monkeypatch.setattr(R, "run_report", lambda spec, out, **kw: seen.append((spec.name, Path(out))) or Path(out))
    rc, out, err = run(BASE["report"] + ["--name", "../../x"], capsys)
    assert rc == 0 and seen == [("../../x", Path("report-x.html"))]
    rc, out, err = run(BASE["report"] + ["--timeout", "0"], capsys)
    assert rc == 2 and "--timeout" in err


def test_only_project_errors_are_exit_2(monkeypatch, capsys):
    """A bug is not bad input: anything but a VramlibError propagates (the old catch of OSError is gone)."""
    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli, "cmd_gpus", broken)
    with pytest.raises(ZeroDivisionError):
        cli.main(["gpus"])
    monkeypatch.setattr(cli, "cmd_models", lambda args: (_ for _ in ()).throw(PermissionError("bug")))
    with pytest.raises(PermissionError):
        cli.main(["models"])
    assert issubclass(cli.UsageError, VramlibError)


def test_exercise_logs(tmp_path, capsys):
    """Was: a latin-1 log gave a UnicodeDecodeError traceback; a file of non-records exited 0 with one warning per
    line; a log that is a folder printed a two-line warning."""
    bad = tmp_path / "answers.jsonl"
    bad.write_bytes("{\"who\": \"Jos\xe9\"}\n".encode("latin-1"))
    rc, out, err = run(["exercises", "summary", str(bad)], capsys)
    assert rc == 2 and err.count("\n") == 1 and "UTF-8" in err
    bad.write_text("root:x:0:0\nbin:x:1:1\n")
    rc, out, err = run(["exercises", "summary", str(bad)], capsys)
    assert rc == 2 and err.count("\n") == 1 and "no check records" in err
    rc, out, err = run(["exercises", "check", "ch01-1", "1", "--log", str(tmp_path)], capsys)
    assert rc == 1 and err.count("\n") == 1 and err.startswith("vramlib: warning: exercise result not recorded")


def test_real_entry_point_one_line_no_traceback():
    for argv, option in ((["fit", *M7, *GPU, "--tokens", "0"], "--tokens"),
                         (["plan", *M7, "--gpu", "8xa100-80gb", "--top", "0"], "--top")):
        p = subprocess.run([sys.executable, "-m", "vramlib", *argv], capture_output=True, text=True, cwd=ROOT)
        assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
        assert option in p.stderr and "Traceback" not in p.stderr


# --- the participants CSV ------------------------------------------------------------------------------------
HEAD = "name,gpu,models,tasks\n"
GOOD = "Ann,rtx-4090,llama-3.1-8b,inference\n"

# (file bytes, expected): expected is a list of (name, error fragment or None) for a file that is read, or the
# fragment of the one-line error for a file that is refused.
CSV_CASES = {
    "latin-1": ((HEAD + "José Müller,rtx-4090,llama-3.1-8b,inference\n").encode("latin-1"), [("José Müller", None)]),
    "cp1252": ((HEAD + "Zoë “Z”,rtx-4090,llama-3.1-8b,inference\n").encode("cp1252"), [("Zoë “Z”", None)]),
    "utf-8-bom": (b"\xef\xbb\xbf" + (HEAD + "李雷,rtx-4090,llama-3.1-8b,inference\n").encode(), [("李雷", None)]),
    "utf-16-bom": ((HEAD + GOOD).encode("utf-16"), [("Ann", None)]),
    "crlf": ((HEAD + GOOD).replace("\n", "\r\n").encode(), [("Ann", None)]),
    "blank lines": (("\n\n" + HEAD + "\n" + GOOD + "\n  \n,,,\n" + "Bo,l4,mistral-7b,inference\n\n").encode(),
                    [("Ann", None), ("Bo", None)]),
    "extra column": (("name,gpu,models,email,notes\nAnn,rtx-4090,llama-3.1-8b,a@b.c,hi\n").encode(), [("Ann", None)]),
    "header case and spaces": (b"Name, GPU ,Model,Weight formats\nAnn,rtx-4090,llama-3.1-8b,int8\n", [("Ann", None)]),
    "semicolons": (b"name;gpu;models\nAnn;rtx-4090;llama-3.1-8b|mistral-7b\n", [("Ann", None)]),
    "tabs": (b"name\tgpu\tmodels\nAnn\trtx-4090\tllama-3.1-8b\n", [("Ann", None)]),
    "trailing comma": (b"name,gpu,models,\nAnn,rtx-4090,llama-3.1-8b,\n", [("Ann", None)]),
    "huge but valid tokens": ((HEAD[:-1] + ",tokens\n" + GOOD[:-1] + ",99999999999999999999\n").encode(), [("Ann", None)]),
    # refused files: one line naming what is wrong
    "empty": (b"", "the file is empty"),
    "whitespace only": (b"  \n\n", "the file is empty"),
    "only separators": (b",,,\n,,\n", "no header"),
    "header only": (HEAD.encode(), "no participant rows"),
    "missing column": (b"name,gpu\nAnn,rtx-4090\n", "missing: models"),
    "no header": (GOOD.encode(), "missing: name, gpu, models"),
    "misspelt column": (b"name,gpu,models,toknes\nAnn,rtx-4090,llama-3.1-8b,4096\n", "column: unknown name 'toknes'; did you mean 'tokens'"),
    "duplicate column": (b"name,gpu,models,model\nAnn,rtx-4090,llama-3.1-8b,mistral-7b\n", "column: got 'model'"),
    "NUL bytes": (b"name,gpu,models\nA\x00n,rtx-4090,llama-3.1-8b\n", "NUL bytes"),
    "huge field": ((HEAD + "Ann,rtx-4090,\"" + "x" * 200_000 + "\",inference\n").encode(), "not valid CSV"),
}
# rows that are bad: the others are still read; the bad one carries its one-line reason (line and column)
BAD_ROWS = {
    "unknown model": ("Bo,rtx-4090,llama-9,inference", "line 3 (Bo): model: unknown name 'llama-9'"),
    "gpu typo": ("Bo,rtx-409,llama-3.1-8b,inference", "line 3 (Bo): gpu: unknown name 'rtx-409'"),
    "no gpu": ("Bo,,llama-3.1-8b,inference", "line 3 (Bo): gpu: got ''"),
    "no models": ("Bo,rtx-4090,,inference", "line 3 (Bo): models"),
    "bad task": ("Bo,rtx-4090,llama-3.1-8b,serve", "line 3 (Bo): task: unknown name 'serve'"),
    "too few fields": ("Bo,rtx-4090", "line 3 (Bo): models"),
    "too many fields": ("Bo,rtx-4090,llama-3.1-8b,inference,mistral-7b", "line 3 (Bo): row: 5 fields but the header names 4"),
    "duplicate name": ("ann,rtx-4090,llama-3.1-8b,inference", "line 3 (ann): name: got 'ann'; line 2 has the same name"),
    "control character in name": ("Bo\x07,rtx-4090,llama-3.1-8b,inference", "): name: got 'Bo\\x07'"),
    "no name": (",rtx-4090,llama-9,inference", "line 3 (line 3): model"),
}
for _col, _vals in {"tokens": ["0", "-5", "nan", "1e999", "4096.5", "²", "lots", "4 096"],
                    "seq": ["0", "x"], "batch": ["0", "-1"], "lora_rank": ["0"], "micro_batch": ["0"]}.items():
    for _v in _vals:
        BAD_ROWS[f"{_col}={_v}"] = (f"Bo,rtx-4090,llama-3.1-8b,inference,{_v}", f"line 3 (Bo): {_col}: got", _col)


@pytest.mark.parametrize("case", list(CSV_CASES))
def test_csv_files(case, tmp_path):
    data, expected = CSV_CASES[case]
    p = tmp_path / "people.csv"
    p.write_bytes(data)
    if isinstance(expected, str):
        with pytest.raises(VramlibError) as e:
            R.read_participant_rows(p)
        assert "\n" not in str(e.value) and expected in str(e.value), str(e.value)
        return
    rows = R.read_participant_rows(p)
    assert [(r.name, r.error) for r in rows] == expected
    assert all(r.spec is not None and r.spec.name == r.name for r in rows)


def test_csv_quoted_name_on_two_lines_is_one_line(tmp_path):
    p = tmp_path / "people.csv"
    p.write_text(HEAD + '"Bo\n Chen",rtx-4090,llama-3.1-8b,inference\n' + "Cy,rtx-4090,llama-9,inference\n")
    rows = R.read_participant_rows(p)
    assert rows[0].name == "Bo Chen" and rows[0].error is None
    assert rows[1].error.startswith("people.csv line 4 (Cy): model")  # physical line numbers


def test_csv_values_are_read_right(tmp_path):
    p = tmp_path / "people.csv"
    p.write_bytes(b"Name, GPU ,Model,Weight formats,Tokens\nAnn,2x24GiB,llama-3.1-8b;mistral-7b,int8;int4,8192\n")
    (row,) = R.read_participant_rows(p)
    s = row.spec
    assert (s.gpu, s.models, s.weight_formats, s.tokens) == ("2x24GiB", ("llama-3.1-8b", "mistral-7b"),
                                                             ("int8", "int4"), 8192)


@pytest.mark.parametrize("case", list(BAD_ROWS))
def test_csv_bad_row_keeps_the_others(case, tmp_path):
    line, fragment, *extra_col = BAD_ROWS[case]
    head = HEAD if not extra_col else HEAD[:-1] + f",{extra_col[0]}\n"
    good = GOOD if not extra_col else GOOD[:-1] + ",\n"
    p = tmp_path / "people.csv"
    p.write_text(head + good + line + "\n" + "Cy,l4,mistral-7b,inference" + ("," if extra_col else "") + "\n")
    rows = R.read_participant_rows(p)
    assert [r.error is None for r in rows] == [True, False, True], [r.error for r in rows]
    err = rows[1].error
    assert "\n" not in err and err.startswith("people.csv line 3") and fragment in err, err
    with pytest.raises(VramlibError, match="people.csv line 3"):  # the strict reader stops at it
        R.read_participants(p)


def test_csv_sweep_is_large():
    assert len(CSV_CASES) + len(BAD_ROWS) >= 40


# --- batches lose nothing -------------------------------------------------------------------------------------
def _fake_report(fail: dict[str, Exception]):
    def fake(spec, out, **kw):
        if spec.name in fail:
            raise fail[spec.name]
        Path(out).write_text(f"<html>{spec.name}</html>")
        return Path(out)

    return fake


def test_batch_runtime_failure_keeps_the_others(tmp_path, monkeypatch):
    """A participant whose report fails on bad input at run time gets a summary row with the reason."""
    from vramlib.core.errors import InvalidValueError

    monkeypatch.setattr(R, "run_report", _fake_report({"Bo": InvalidValueError("timeout", 1, "too short")}))
    specs = [R.ReportSpec(n, "rtx-4090", "llama-3.1-8b", "inference") for n in ("Ann", "Bo", "Cy")]
    batch = R.run_batch(specs, tmp_path / "out", progress=False)
    assert [p.name for p in batch.reports] == ["ann.html", "cy.html"]
    assert [(f.name, f.error) for f in batch.failed] == [("Bo", "Bo: timeout: got 1; too short")]
    rows = list(csv.DictReader(batch.summary_csv.open(encoding="utf-8")))
    assert {r["name"] for r in rows} == {"Ann", "Bo", "Cy"}
    assert [r["error"] for r in rows if r["name"] == "Bo"] == ["Bo: timeout: got 1; too short"]
    assert "no report: Bo: timeout" in batch.summary_html.read_text()


def test_batch_bug_surfaces_after_writing_everything(tmp_path, monkeypatch):
    """A failure inside the notebook that is not bad input is a bug: the others and the summaries are written,
    then the error is raised (never swallowed)."""
    from papermill.exceptions import PapermillExecutionError

    bug = PapermillExecutionError(3, 1, "src", "KeyError", "'weights'", [])
    monkeypatch.setattr(R, "run_report", _fake_report({"Ann": bug}))
    specs = [R.ReportSpec(n, "rtx-4090", "llama-3.1-8b", "inference") for n in ("Ann", "Bo")]
    with pytest.raises(PapermillExecutionError):
        R.run_batch(specs, tmp_path / "out", progress=False)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["bo.html", "summary.csv", "summary.html"]
    assert "a bug in vramlib" in (out / "summary.csv").read_text()


def test_batch_file_names_are_unique_and_safe(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "run_report", _fake_report({}))
    names = ["Ann Lee", "Ann-Lee", "李雷", "王芳", "Summary", "../../etc/passwd", "José"]
    batch = R.run_batch([R.ReportSpec(n, "rtx-4090", "llama-3.1-8b", "inference") for n in names], tmp_path,
                        progress=False)
    assert [p.name for p in batch.reports] == ["ann-lee.html", "ann-lee-2.html", "participant.html",
                                               "participant-2.html", "summary-2.html", "etc-passwd.html", "jose.html"]
    assert all(p.parent == tmp_path for p in batch.reports) and not batch.failed


def test_summary_html_escapes_every_user_string():
    rows = [{"name": HOSTILE_NAME, "gpu": "<b>gpu</b>", "model": "<i>m</i>", "setting": "<u>s</u>", "fits": "yes",
             "per-GPU total (GB)": 1.0, "longest context (tokens)": ""}]
    failed = [R.Participant(3, "<img src=x onerror=alert(2)>", "<gpu>", None, "x: <script>bad</script>")]
    page = R.summary_html(rows, {HOSTILE_NAME: "a'><script>.html"}, failed)
    for raw in ("<script>", "<b>", "<i>", "<u>", "<img", "<gpu>"):
        assert raw not in page, raw
    assert "<a href='a&#x27;&gt;&lt;script&gt;.html'>" in page  # the link cannot close its attribute
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Bob&quot;" in page


def test_md_escape_renders_literally():
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    for text in (HOSTILE_NAME, "[x](javascript:alert(1))", "*a* _b_ `c` # d", "<img src=x onerror=alert(1)>", "a\\b"):
        page = markdown2html_mistune(R.md_escape(text))
        assert "<script" not in page and "<img" not in page and "<a " not in page and "<em>" not in page, page
    assert R.md_escape("llama-3.1-8b") == "llama-3.1-8b"


def test_template_escapes_what_it_shows():
    nb = json.loads(R.template_path().read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "{participant}" not in code and "{e(spec.name)}" in code and "{e(hardware.describe())}" in code
    assert "LoRA rank {spec.lora_rank}" in code  # the assumptions follow the spec (was a fixed 'rank 16')


def test_batch_with_bad_rows_real_papermill(tmp_path, capsys):
    """The one real papermill run of this file: a good row with a hostile name and four bad rows (unknown model,
    GPU typo, bad number, a comma instead of ';'). The good report and both summaries are written, every bad
    row is in them with its reason, the exit code is 2 with one line, and no name is HTML."""
    people = tmp_path / "people.csv"
    people.write_bytes(("name,gpu,models,tasks,tokens\n"
                        f'"{HOSTILE_NAME.replace(chr(34), chr(34) * 2)}",rtx-4090,mistral-7b,inference,\n'
                        "Bo,rtx-4090,llama-9,inference,\n"
                        "Cai,rtx-409,mistral-7b,inference,\n"
                        "\n"
                        "Dee,rtx-4090,mistral-7b,inference,0\n"
                        "Eve,rtx-4090,mistral-7b,llama-3.1-8b,inference,8192\n").encode("latin-1"))
    out_dir = tmp_path / "out"
    rc, out, err = run(["report", "--participants", str(people), "--out-dir", str(out_dir), "--quiet"], capsys)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "4 of 5 participants have no report" in err and "line 3 (Bo): model: unknown name 'llama-9'" in err
    good = "script-alert-1-script-bob.html"
    assert sorted(p.name for p in out_dir.iterdir()) == [good, "summary.csv", "summary.html"]
    assert out.splitlines() == [str(out_dir / good), str(out_dir / "summary.html"), str(out_dir / "summary.csv")]
    rows = list(csv.DictReader((out_dir / "summary.csv").open(encoding="utf-8")))
    errors = {r["name"]: r["error"] for r in rows if r["error"]}
    assert sorted(errors) == ["Bo", "Cai", "Dee", "Eve"]
    assert "gpu: unknown name 'rtx-409'" in errors["Cai"] and "tokens: got 0" in errors["Dee"]
    assert "line 7 (Eve): row: 6 fields" in errors["Eve"]
    assert {r["name"] for r in rows if not r["error"]} == {HOSTILE_NAME} and all(
        r["report"] == good for r in rows if not r["error"])
    summary = (out_dir / "summary.html").read_text()
    page = (out_dir / good).read_text()
    for html_text in (summary, page):
        assert "<script>alert" not in html_text and "alert(1)&lt;/script&gt;" in html_text
    assert summary.count("no report:") == 4
    assert "<title>vramlib report: &lt;script&gt;alert(1)&lt;/script&gt; &amp; \"Bob\"</title>" in page
    assert "a report for &lt;script&gt;alert(1)&lt;/script&gt; &amp;" in page and "mistral-7b" in page


def test_exercise_arguments_after_options(tmp_path, capsys):
    """Was: 'exercises check --who ann KEY ANSWER' failed with 'unrecognized arguments: KEY ANSWER'."""
    log = tmp_path / "a.jsonl"
    rc, out, err = run(["exercises", "check", "--who", "ann", "--log", str(log), "ch01-1", "1"], capsys)
    assert rc == 1 and "ch01-1: not yet" in out and err == ""
    rc, out, err = run(["exercises", "summary", "--csv", str(log)], capsys)
    assert rc == 0 and out.startswith("participant,solved,tried") and "ann" in out


def test_batch_output_folder_that_is_a_file(no_kernel, capsys):
    (no_kernel / "people.csv").write_text(HEAD + GOOD)
    (no_kernel / "taken").write_text("a file")
    rc, out, err = run(["report", "--participants", "people.csv", "--out-dir", "taken", "--quiet"], capsys)
    assert (rc, out) == (2, "") and err.count("\n") == 1 and "out_dir: got 'taken'; cannot create the folder" in err


def test_summary_csv_cells_cannot_run_as_formulas():
    row = R._csv_safe({"name": "=HYPERLINK(\"http://x\")", "gpu": "@SUM(A1)", "error": "-1+1", "GB": 12.5, "ok": "Ann"})
    assert row == {"name": "'=HYPERLINK(\"http://x\")", "gpu": "'@SUM(A1)", "error": "'-1+1", "GB": 12.5, "ok": "Ann"}
