"""Peaks of full-size training steps and inference on the fake CUDA device, tracked by MemTracker (issue 13).

Each case builds a real model shape (a catalogue ``config.json``, every layer) on the fake ``cuda`` device under
``FakeTensorMode`` -- tensors with shapes, dtypes and devices but no storage -- and runs it under a MemTracker that
also records *where* the peak happens (``WhereTracker``: the phase, the innermost module and the operator that made
the total largest). What fake CUDA on a CPU-only torch needs is in ``_fake_cuda.py`` (c10's fake device guard and
CUDA hooks compiled into a tiny extension, FlashAttention-2 pinned as the CUDA dispatcher picks it for these calls,
CUDA autocast entered without its driver check).

A training case measures the **steady-state step**: the optimizer's states are created first (one step on zero
gradients, outside the tracker, as the first real step would), then one tracked step -- forward, loss backward,
backward, ``optimizer.step()``, ``zero_grad(set_to_none=True)``. This is the second and every later step of a real
loop, whose peak is at least the first step's (the states are alive through its forward and backward). Phases:

* ``forward``: from the input to the loss (transformers' causal-LM loss: logits in the model's dtype, ``.float()``,
  cross-entropy);
* ``loss backward``: from ``loss.backward()`` until the LM head's backward starts (the fp32 log-softmax gradient);
* ``backward``: the LM head's and the layers' backward, gradients accumulating;
* ``optimizer step``: ``optimizer.step()`` (the implementation's temporaries).

``steady`` is what stays allocated after ``zero_grad``: parameters, optimizer states (and buffers).

An inference case is a prefill with a DynamicCache (``logits_to_keep=1`` as ``generate`` does, or 0 as an evaluation
loop does) and, for ``decode`` cases, one more token appended to that cache (the decode step's own peak).

    python tools/measure/step_peaks.py                 # every case (about 40 min on 2 CPUs), writes step_peaks.json
    python tools/measure/step_peaks.py --only ID ...   # the named cases, merged into the stored file
    python tools/measure/step_peaks.py --list          # the case ids
    python tools/measure/step_peaks.py --check ID ...  # re-measure the named cases (default: the quick set), exit 1 on a
                                                       # difference from the stored rows
    python tools/measure/step_peaks.py --real-cuda     # on a CUDA GPU: the cases that fit, with real tensors, plus
                                                       # max_memory_allocated / reserved -> step_peaks_cuda.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass

from _offline import ROOT, cases_main, header, language_model_config, run_cases, write_json

OUT = ROOT / "vramlib" / "data" / "measured" / "step_peaks.json"
COMMAND = "python tools/measure/step_peaks.py"


@dataclass(frozen=True)
class Case:
    """One measurement. ``kind``: train | prefill | decode. ``precision``: pure-bf16 (bf16 parameters, gradients and
    optimizer states) | autocast (fp32 parameters under CUDA autocast to bf16) for full fine-tuning; LoRA's base is
    bf16 and ``lora_dtype`` is its adapters' dtype. ``optimizer``: adamw | sgd | adafactor | adamw-8bit; ``impl``:
    foreach | fused | for-loop (torch.optim's three implementations)."""

    model: str
    kind: str = "train"
    seq: int = 2048
    batch: int = 1
    method: str = "full"
    precision: str = "pure-bf16"
    optimizer: str = "adamw"
    impl: str = "foreach"
    recompute: str = "none"
    lora_rank: int = 16
    lora_dtype: str = "fp32"
    logits: str = "last"

    @property
    def id(self) -> str:
        if self.kind != "train":
            return f"{self.kind}/{self.model}/{self.seq}x{self.batch}/{self.logits}"
        what = (f"{self.method}-{self.lora_dtype}" if self.method == "lora" else self.precision)
        return (f"train/{self.model}/{self.seq}x{self.batch}/{what}/{self.optimizer}-{self.impl}/"
                f"recompute-{self.recompute}")


def _cases() -> list[Case]:
    c = []
    seven, small, moe = "llama-2-7b", "qwen2.5-0.5b", "qwen3-30b-a3b"
    for precision in ("pure-bf16", "autocast"):                      # AdamW's three implementations
        for impl in ("foreach", "fused", "for-loop"):
            c.append(Case(seven, precision=precision, impl=impl))
        c.append(Case(seven, precision=precision, recompute="full"))
    c += [Case(seven, optimizer="sgd"), Case(seven, optimizer="adafactor", impl="for-loop"),
          Case(seven, optimizer="adamw-8bit", impl="fused"),      # bitsandbytes' own fused kernel
          Case(seven, seq=4096, recompute="full"), Case(seven, seq=512, batch=4),
          Case("llama-3.1-8b"), Case("llama-3.1-8b", precision="autocast")]
    for dtype in ("fp32", "bf16"):                                     # LoRA r=16 on every linear module
        c.append(Case(seven, method="lora", lora_dtype=dtype))
        c.append(Case(seven, method="lora", lora_dtype=dtype, recompute="full"))
    for batch in (1, 4, 8):                                            # a 152K vocabulary
        c.append(Case(small, batch=batch))
        c.append(Case(small, batch=batch, precision="autocast"))
    c.append(Case(small, batch=8, recompute="full"))
    c.append(Case(small, method="lora", batch=4))
    c += [Case(moe, seq=1024), Case(moe, method="lora", seq=1024)]
    # fused AdamW has no step temporaries: the activations' phases set these peaks
    c += [Case(seven, seq=4096, impl="fused"), Case(seven, seq=4096, impl="fused", recompute="full"),
          Case(seven, seq=512, batch=4, impl="fused"), Case("llama-3.1-8b", seq=4096, impl="fused"),
          Case(seven, seq=4096, impl="fused", precision="autocast"), Case(small, batch=4, impl="fused")]
    for model in (seven, "llama-3.1-8b", small):                          # inference
        for logits in ("last", "all"):
            c.append(Case(model, kind="prefill", logits=logits))
        c.append(Case(model, kind="decode", seq=8192))
    c.append(Case(seven, kind="prefill", seq=8192))
    return c


CASES = {x.id: x for x in _cases()}
QUICK = ("train/qwen2.5-0.5b/2048x1/pure-bf16/adamw-foreach/recompute-none", "prefill/qwen2.5-0.5b/2048x1/last")
"""Re-measured by ``--check`` without ids (about a minute)."""


# ------------------------------------------------------------------------------------------------------------------
# the tracker that says where
# ------------------------------------------------------------------------------------------------------------------

class _NoHook:
    @staticmethod
    def remove():
        pass


def where_tracker():
    """A MemTracker that also records the phase, innermost module and operator at which the total peaked, and the
    peak of each phase (``phase_peaks``)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    class WhereTracker(MemTracker):
        def __init__(self):
            super().__init__()
            self.phase, self.func, self.where, self.phase_peaks, self.phase_where = "setup", None, {}, {}, {}

        def _track_module_params_and_buffers(self, module, install_grad_hooks=True):
            # MemTracker hooks every parameter's gradient, and register_hook refuses a frozen one (LoRA's base):
            # mark those as hooked already, with handles that remove nothing
            for p in module.parameters():
                if not p.requires_grad and self._param_to_grad_hook_handles.get(p, None) is None:
                    self._param_to_grad_hook_handles[p] = (_NoHook, _NoHook)
            return super()._track_module_params_and_buffers(module, install_grad_hooks)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.func = func
            return super().__torch_dispatch__(func, types, args, kwargs)

        def _update_peak_stats(self, peak_state):
            # MemTracker's own version also updates every tracked module's local peak on every operator (a loop over
            # all modules, slow with peft's many small ones); only the global peak and the phases are needed here
            before = dict(self._peak_mem)
            for dev, snap in self._curr_mem_snap.items():
                if self._peak_mem.get(dev, 0) < snap["Total"]:
                    self._peak_mem[dev] = snap["Total"]
                    self._peak_mem_snap[dev] = dict(snap)
            for dev, snap in self._curr_mem_snap.items():
                if not str(dev).startswith("cuda"):
                    continue
                total = snap["Total"]
                new_phase_peak = total > self.phase_peaks.get(self.phase, 0)
                if new_phase_peak or self._peak_mem.get(dev, 0) > before.get(dev, 0):
                    parents = sorted(self._mod_tracker.parents, key=lambda p: (p.count("."), len(p)))
                    here = {"phase": self.phase, "module": parents[-1] if parents else None, "op": str(self.func)}
                    if new_phase_peak:
                        self.phase_peaks[self.phase] = total
                        self.phase_where[self.phase] = {**here, "by_category": _split({dev: snap})}
                    if self._peak_mem.get(dev, 0) > before.get(dev, 0):
                        self.where = here

    return WhereTracker()


def _split(snapshot: dict) -> dict:
    """{category: bytes, 'Total': bytes} of the cuda device in a MemTracker snapshot (0 when nothing is there)."""
    for dev, cats in snapshot.items():
        if str(dev).startswith("cuda"):
            return {(k if isinstance(k, str) else k.value): int(v) for k, v in cats.items()}
    return {"Total": 0}


# ------------------------------------------------------------------------------------------------------------------
# building and running
# ------------------------------------------------------------------------------------------------------------------

def _config(key: str):
    cfg = json.loads((ROOT / "vramlib" / "data" / "hf_configs" / f"{key}.json").read_text())
    cfg = language_model_config({k: v for k, v in cfg.items() if not k.startswith("_")})
    cfg.use_cache = False
    return cfg


def build(torch, case: Case):
    from transformers import AutoModelForCausalLM

    dtype = torch.float32 if case.precision == "autocast" and case.method == "full" else torch.bfloat16
    extra = {"experts_implementation": "grouped_mm"} if "moe" in _config(case.model).model_type else {}
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(_config(case.model), dtype=dtype, attn_implementation="sdpa",
                                                 **extra)
    if case.method == "lora":
        from peft import LoraConfig, get_peft_model

        import _fake_cuda

        with _fake_cuda.set_data_moves(), torch.device("cuda"):   # adapters made on the device (see set_data_moves)
            model = get_peft_model(model, LoraConfig(r=case.lora_rank, lora_alpha=2 * case.lora_rank,
                                                     target_modules="all-linear"),
                                   autocast_adapter_dtype=case.lora_dtype == "fp32")
    if case.recompute == "full":
        if case.method == "lora":
            model.enable_input_require_grads()
        model.activation_checkpointing_enable()   # non-reentrant (torch.utils.checkpoint, use_reentrant=False)
    return model


def optimizer(torch, case: Case, params):
    import _fake_cuda

    if case.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=1e-5, foreach=case.impl == "foreach", fused=case.impl == "fused")
    if case.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-5, momentum=0.9, foreach=case.impl == "foreach")
    if case.optimizer == "adafactor":     # transformers' Adafactor (vramlib's "adafactor"): no first moment, a fixed lr
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=1e-5, scale_parameter=False, relative_step=False, warmup_init=False)
    if case.optimizer == "adamw-8bit":   # bitsandbytes (installed separately: it is not a vramlib dependency)
        return _fake_cuda.bnb_adamw8bit(params, lr=1e-5)
    raise ValueError(case.optimizer)


def run_train(torch, case: Case) -> dict:
    model = build(torch, case)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer(torch, case, params)
    for p in params:                      # the states exist from the first step on: make them as that step does
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)
    ids = torch.randint(0, model.config.vocab_size, (case.batch, case.seq), device="cuda")
    mt = where_tracker()
    mt.track_external(model, opt)
    head = model.get_output_embeddings()
    hook = head.register_full_backward_pre_hook(lambda *a: setattr(mt, "phase", "backward"))
    autocast = torch.autocast("cuda", torch.bfloat16) if case.precision == "autocast" and case.method == "full" \
        else None
    with mt:
        mt.phase = "forward"
        if autocast:
            with autocast:
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        else:
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        end_forward = _split(mt.get_tracker_snapshot())
        mt.phase = "loss backward"
        loss.backward()
        del loss
        end_backward = _split(mt.get_tracker_snapshot())
        mt.phase = "optimizer step"
        opt.step()
        opt.zero_grad(set_to_none=True)
        mt.phase = "after"
    hook.remove()
    steady = _split(mt.get_tracker_snapshot())
    return {"peak": _split(mt.get_tracker_snapshot("peak")), "where": mt.where, "phase_peaks": mt.phase_peaks,
            "phase_where": mt.phase_where,
            "end_forward": end_forward, "end_backward": end_backward, "steady": steady,
            "trainable_params": sum(p.numel() for p in params),
            "params": sum(p.numel() for p in model.parameters())}


def run_inference(torch, case: Case) -> dict:
    from transformers import DynamicCache

    model = build(torch, case).eval()
    ids = torch.randint(0, model.config.vocab_size, (case.batch, case.seq), device="cuda")
    mt = where_tracker()
    mt.track_external(model)
    out = {}
    with mt, torch.no_grad():
        mt.phase = "prefill"
        cache = DynamicCache(config=model.config)
        res = model(input_ids=ids, past_key_values=cache, use_cache=True,
                    logits_to_keep=1 if case.logits == "last" else 0)
        out["prefill_peak"] = _split(mt.get_tracker_snapshot("peak"))
        del res                           # the caller drops the prefill's output (a decode keeps only the cache)
        if case.kind == "decode":
            out["before_decode"] = _split(mt.get_tracker_snapshot())
            mt.phase = "decode"
            mt._peak_mem = {}             # the decode step's own peak (the prefill's is recorded above)
            mt.reset_mod_stats()          # MemTracker tracks one call per module unless reset
            model(input_ids=ids[:, :1], past_key_values=cache, use_cache=True, logits_to_keep=1)
    out.update(peak=_split(mt.get_tracker_snapshot("peak")) if case.kind == "decode" else out["prefill_peak"],
               where=mt.where, phase_peaks=mt.phase_peaks, phase_where=mt.phase_where, params=sum(p.numel() for p in model.parameters()))
    return out


def measure(case: Case, real: bool = False) -> dict:
    """One case in this process: its row, or the one-line reason it could not be measured. ``real``: on the CUDA
    GPU of this machine, with real tensors (random weights), adding the caching allocator's readings."""
    import torch

    t0 = time.perf_counter()
    row = {"id": case.id, **asdict(case)}
    try:
        if real:
            row.update(device=torch.cuda.get_device_name(0), sdpa="the CUDA dispatcher's choice")
            torch.cuda.reset_peak_memory_stats()
            start = torch.cuda.memory_allocated()
            got = run_train(torch, case) if case.kind == "train" else run_inference(torch, case)
            torch.cuda.synchronize()
            got["cuda"] = {"max_memory_allocated": torch.cuda.max_memory_allocated() - start,
                           "max_memory_reserved": torch.cuda.max_memory_reserved(),
                           "gpu_total_memory": torch.cuda.get_device_properties(0).total_memory}
        else:
            from torch._subclasses.fake_tensor import FakeTensorMode

            import _fake_cuda

            _fake_cuda.install()
            _fake_cuda.as_eager_masks()
            torch.nn.functional.scaled_dot_product_attention = _fake_cuda.flash_sdpa
            row.update(device="fake cuda", sdpa="flash (aten._scaled_dot_product_flash_attention)")
            with FakeTensorMode(allow_non_fake_inputs=True):
                got = run_train(torch, case) if case.kind == "train" else run_inference(torch, case)
        row.update(got, peak_bytes=got["peak"]["Total"])
    except Exception as e:  # noqa: BLE001 -- a case that cannot run is recorded as such
        row["not_measured"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def real_cases(capacity: int, share: float = 0.85) -> list[str]:
    """The cases whose predicted peak (vramlib's, or the fake-CUDA measurement when vramlib does not model it) is
    under ``share`` of the GPU's memory: what a real run can measure."""
    stored = {r["id"]: r.get("peak_bytes") for r in json.loads(OUT.read_text())["rows"]}
    return [i for i in CASES if stored.get(i) and stored[i] < share * capacity]


def _child(ids: list[str], real: bool = False) -> None:
    for i in ids:
        print(json.dumps(measure(CASES[i], real)), flush=True)


def run(ids: list[str], jobs: int, real: bool = False) -> list[dict]:
    """Each case in a fresh process (``jobs`` at a time), so one case's state never leaks into another's."""
    return run_cases(__file__, ids, jobs, ("--real-cuda",) if real else ())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", help="measure these case ids and merge them into the stored file")
    parser.add_argument("--check", nargs="*", help="re-measure these ids (default: the quick set) and compare")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--real-cuda", action="store_true",
                        help="on a CUDA GPU: the cases that fit, with real tensors, into step_peaks_cuda.json")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.real_cuda)
        return 0
    if args.real_cuda:
        return real_main(args)
    data = header(COMMAND, "fake cuda (FakeTensorMode, c10 fake guard) under MemTracker",
                  "Ground truth only. peak_bytes = MemTracker's peak total on the fake cuda device; 'peak' splits it by "
                  "category, 'where' says in which phase, module and operator it happened, 'phase_peaks' the largest "
                  "total within each phase, 'steady' what stays allocated after zero_grad. Training: the steady-state "
                  "step (optimizer states made beforehand). sdpa: FlashAttention-2 as CUDA runs it for these calls.")
    import peft

    data["peft"] = peft.__version__
    return cases_main(args, "step_peaks", CASES, QUICK, OUT, run, data)


def real_main(args) -> int:
    """The GPU run: the cases that fit on this card (at most ``--only``), one process at a time, into
    ``step_peaks_cuda.json`` (nothing without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        print("step_peaks --real-cuda: no CUDA device; nothing measured", file=sys.stderr)
        return 0
    ids = args.only or real_cases(torch.cuda.get_device_properties(0).total_memory)
    data = header(COMMAND + " --real-cuda", torch.cuda.get_device_name(0),
                  "Real CUDA tensors (random weights): MemTracker's peak and the caching allocator's "
                  "max_memory_allocated / max_memory_reserved for the fake-CUDA cases that fit on this card.")
    data["rows"] = run(ids, 1, real=True)
    write_json(OUT.with_name("step_peaks_cuda.json"), data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
