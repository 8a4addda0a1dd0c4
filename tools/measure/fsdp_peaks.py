"""Peaks of full-size data-parallel training steps, one rank of FSDP2 (ZeRO-3 / ZeRO-2 sharding) on the fake CUDA
device under ``FSDPMemTracker`` (issue 13: the plans' phases).

One process plays rank 0 of ``dp`` ranks: ``torch.distributed``'s ``fake`` process group (``FakeStore``) accepts
every collective without moving data, so ``fully_shard`` shards each decoder layer and the root over a device mesh of
``dp`` fake GPUs, all-gathers before each layer's forward and backward and reduce-scatters its gradients, and
``FSDPMemTracker`` (``torch.distributed._tools.fsdp2_mem_tracker``) splits what rank 0 allocates into FSDP's own
categories: sharded / unsharded parameters and gradients, all-gather and reduce-scatter buffers, activations,
temporaries, optimizer states. On top of ``_fake_cuda.py``'s fake CUDA device, FSDP2 needs CUDA streams and events
(``torch.cuda.Stream``, ``Event``, ``current_stream``, ``stream``, ``current_device``): on one fake device every
stream is the same, so :func:`fake_streams` gives them as objects that do nothing (ordering does not change which
tensors exist, only when a real GPU may reuse them). FlashAttention-2 and transformers' masks as ``step_peaks.py``.

A case is the steady-state step (the optimizer's states made first): forward with the loss, backward,
``optimizer.step()``, ``zero_grad(set_to_none=True)``, with the cumulative peak read after each phase, so the phase
that set the peak is known. ``reshard``: ``zero3`` (``reshard_after_forward=True``: parameters gathered again for
backward) or ``zero2`` (``False``: kept gathered from forward to backward). ``precision``: ``pure-bf16`` (bf16
sharded parameters) or ``fp32-master`` (fp32 sharded parameters, ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)``: bf16 compute, fp32 AdamW on the shard).

    python tools/measure/fsdp_peaks.py            # every case (a few minutes on 2 CPUs), writes fsdp_peaks.json
    python tools/measure/fsdp_peaks.py --list
    python tools/measure/fsdp_peaks.py --only ID ...
    python tools/measure/fsdp_peaks.py --check [ID ...]   # re-measure (default: the quick case), exit 1 on a difference
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from dataclasses import asdict, dataclass

from _offline import ROOT, cases_main, header, run_cases

OUT = ROOT / "vramlib" / "data" / "measured" / "fsdp_peaks.json"
COMMAND = "python tools/measure/fsdp_peaks.py"


@dataclass(frozen=True)
class Case:
    """One rank of a ``dp``-way FSDP2 step of ``model`` at ``batch`` x ``seq`` (see the module doc)."""

    model: str
    dp: int = 8
    seq: int = 2048
    batch: int = 1
    reshard: str = "zero3"
    precision: str = "pure-bf16"
    impl: str = "foreach"
    recompute: str = "none"
    held_out: bool = False
    """Measured after vramlib.memory.fsdp's phases were written from the other cases (a check they did not shape)."""

    @property
    def id(self) -> str:
        return (f"fsdp/{self.model}/dp{self.dp}/{self.reshard}/{self.seq}x{self.batch}/{self.precision}/"
                f"adamw-{self.impl}/recompute-{self.recompute}")


def _cases() -> list[Case]:
    return [Case("llama-2-7b"), Case("llama-2-7b", impl="fused"), Case("llama-2-7b", recompute="full"),
            Case("llama-2-7b", reshard="zero2"), Case("llama-2-7b", dp=2), Case("llama-2-7b", precision="fp32-master"),
            Case("llama-3.1-8b"), Case("llama-3.1-8b", recompute="full"), Case("qwen2.5-0.5b", dp=4, batch=4),
            Case("qwen2.5-0.5b", dp=4, batch=4, impl="fused"),
            Case("mistral-7b", dp=4, batch=2, recompute="full", held_out=True),
            Case("qwen2.5-7b", seq=4096, held_out=True),
            Case("llama-3.2-1b", dp=2, batch=2, impl="for-loop", held_out=True)]


CASES = {c.id: c for c in _cases()}
QUICK = ("fsdp/qwen2.5-0.5b/dp4/zero3/2048x4/pure-bf16/adamw-fused/recompute-none",)
"""The case ``--check`` re-measures by default (the smallest model: about half a minute)."""


class _Event:
    def __init__(self, *a, **k):
        pass

    def record(self, *a, **k):
        return self

    def wait(self, *a, **k):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True


class _Stream:
    def __init__(self, *a, **k):
        pass

    def wait_stream(self, *a):
        pass

    def wait_event(self, *a):
        pass

    def record_event(self, event=None):
        return event or _Event()

    def synchronize(self):
        pass


def fake_streams(torch) -> None:
    """CUDA streams and events for FSDP2 on the one fake device: objects that order nothing (see the module doc)."""
    one = _Stream()
    torch.cuda.current_device = lambda: 0
    torch.cuda.set_device = lambda *a: None
    torch.cuda.Stream = _Stream
    torch.cuda.Event = _Event
    torch.cuda.current_stream = lambda *a, **k: one
    torch.cuda.stream = lambda s: contextlib.nullcontext()


def _split(snapshot: dict) -> dict:
    """One device's snapshot as {category name: bytes}."""
    dev = next(iter(snapshot.values()))
    return {(k.value if hasattr(k, "value") else str(k)): int(v) for k, v in dev.items()}


def measure(case: Case) -> dict:
    """One case in this process: its row, or the one-line reason it could not be measured."""
    import torch

    t0 = time.perf_counter()
    row = {"id": case.id, **asdict(case)}
    try:
        import _fake_cuda
        import step_peaks
        import torch.distributed as dist
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        from torch.testing._internal.distributed.fake_pg import FakeStore
        from transformers import AutoModelForCausalLM

        _fake_cuda.install()
        _fake_cuda.as_eager_masks()
        torch.nn.functional.scaled_dot_product_attention = _fake_cuda.flash_sdpa
        fake_streams(torch)
        dist.init_process_group("fake", rank=0, world_size=case.dp, store=FakeStore())
        mesh = init_device_mesh("cuda", (case.dp,))     # outside the fake mode: it reads its ranks
        master = case.precision == "fp32-master"
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if master else \
            MixedPrecisionPolicy()
        cfg = step_peaks._config(case.model)
        with FakeTensorMode(allow_non_fake_inputs=True):
            with torch.device("cuda"):
                model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32 if master else torch.bfloat16,
                                                         attn_implementation="sdpa")
            if case.recompute == "full":
                model.activation_checkpointing_enable()   # non-reentrant, as step_peaks.py
            for layer in model.model.layers:
                fully_shard(layer, mesh=mesh, reshard_after_forward=case.reshard == "zero3", mp_policy=mp)
            fully_shard(model, mesh=mesh, reshard_after_forward=case.reshard == "zero3", mp_policy=mp)
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=case.impl == "foreach",
                                    fused=case.impl == "fused")
            for p in model.parameters():     # the states exist from the first step on
                p.grad = torch.zeros_like(p)
            opt.step()
            opt.zero_grad(set_to_none=True)
            ids = torch.randint(0, cfg.vocab_size, (case.batch, case.seq), device="cuda")
            tracker = FSDPMemTracker(model, opt)
            tracker.track_inputs((ids,))
            after = {}
            with tracker:
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                after["forward"] = _split(tracker.get_tracker_snapshot("peak"))
                loss.backward()
                del loss
                after["backward"] = _split(tracker.get_tracker_snapshot("peak"))
                opt.step()
                opt.zero_grad(set_to_none=True)
                after["optimizer step"] = _split(tracker.get_tracker_snapshot("peak"))
            steady = _split(tracker.get_tracker_snapshot())
            peak = after["optimizer step"]
            phase = next(k for k, v in after.items() if v["Total"] == peak["Total"])
            local = sum(p.to_local().numel() for p in model.parameters())
        row.update(peak=peak, peak_bytes=peak["Total"], phase=phase,
                   cumulative_peaks={k: v["Total"] for k, v in after.items()}, steady=steady,
                   local_params=local, params=sum(p.numel() for p in model.parameters()), sdpa="flash")
    except Exception as e:  # noqa: BLE001 -- a case that cannot run is recorded as such
        row["not_measured"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", help="measure these case ids and merge them into the stored file")
    parser.add_argument("--check", nargs="*", help="re-measure these ids (default: the quick case) and compare")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(CASES[args.child])), flush=True)
        return 0
    data = header(COMMAND, "fake cuda (FakeTensorMode, c10 fake guard), fake process group, FSDPMemTracker",
                  "Ground truth only. One rank (rank 0) of a dp-way FSDP2 step: peak_bytes = FSDPMemTracker's peak "
                  "total, 'peak' by FSDP category, 'phase' the phase after which the cumulative peak was reached "
                  "(forward with the loss, backward, optimizer step), 'steady' what stays allocated after zero_grad. "
                  "The steady-state step (optimizer states made beforehand). sdpa: FlashAttention-2.")
    return cases_main(args, "fsdp_peaks", CASES, QUICK, OUT, lambda ids, jobs: run_cases(__file__, ids, jobs), data)


if __name__ == "__main__":
    sys.exit(main())
