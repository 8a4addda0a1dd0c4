"""When the model does not fit on the GPU: layers split between the GPU and host memory, and how fast that decodes
(issue 14).

Owned here, for llama.cpp (``-ngl``, ``--cpu-moe``; the rules of ``docs/offload-rules.md``, read from llama.cpp at
commit 0c1e57098):

* **The split** (:func:`~vramlib.serve.llamacpp.llamacpp_split`): llama.cpp counts the output layer (final norm, LM
  head) as one unit after the blocks and offloads from the end (``i_gpu_start = n_layer + 1 - N``): ``-ngl N`` puts
  the output layer and the last ``N - 1`` blocks on the GPU, each block with its KV cache; the token embeddings stay
  in host memory. ``--cpu-moe`` keeps every routed expert in host memory and the rest of each layer on the GPU. Each
  layer is priced with its own tensor types (a GGUF mix upgrades some layers:
  :func:`vramlib.memory.inference.layer_weights_of`); the context's KV cache and compute buffer follow
  :func:`vramlib.serve.llamacpp.llamacpp_buffers`. The GPU's budget is the card's CUDA total less the CUDA context
  (:func:`vramlib.serve.llamacpp.gpu_budget`); the host's is the RAM less what the system keeps (``host_reserved``).
* **Decode speed** (:data:`DECODE_SECONDS`): one token reads every weight it uses once, and each layer's K and V of
  the tokens in context, where they live: the GPU's at its memory bandwidth, the host's at the DRAM's; routed
  experts by the fraction the router picks (k of E). A roofline: an upper bound on tokens per second that real
  decodes reach a part of (kernel efficiency, the CPU's cores, NUMA are not modelled).
* **Compute buffers** (one per backend, estimated from the source, not measured): the GPU's is the context's
  compute buffer plus, when blocks stay on the host and the micro-batch is at least
  :data:`~vramlib.serve.llamacpp.OP_OFFLOAD_MIN_BATCH`, room for the largest host weight the scheduler copies over
  for a prompt batch (a whole ``*_exps`` tensor under ``--cpu-moe``); the host's (pinned ``CUDA_Host``) is the same
  rule when blocks run there.
* **Other runtimes and devices**: transformers' ``device_map="auto"`` (``runtime="transformers"``: accelerate's
  placement, a roofline whose second term is PCIe); one memory alone (:func:`device_plan`, :func:`device_max_ctx`,
  :func:`device_fit_map`: a Mac under Metal's working set, or a CPU); every catalogue device ranked
  (:func:`recommend_devices`).

Not modelled, named in the result: prompt processing speed. A shape beyond what llama.cpp's buffers cover (MLA,
Mamba) is refused by :func:`vramlib.serve.llamacpp.llamacpp_kinds`; routed-expert layers' compute buffer is an
estimate, and says so.

Used in: chapter 17, the ``vramlib offload`` command and the offload calculator.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from ..catalog.hardware import GPU, get_gpu
from ..catalog.hosts import HOSTS, MACS, get_host
from ..catalog.models import ModelSpec, get_model, layer_types_of
from ..catalog.precision import get_precision, precision_view
from ..core.errors import InvalidValueError, UnknownNameError, check_positive_int, checked_call
from ..core.portable import (Fields, ev, fmt_fixed, portable, q, q_add, q_ceil, q_div, q_float, q_mul, raise_problem,
                             share)
from ..core.settings import Settings, settings_class
from ..core.units import bytes_text, gb, parse_memory
from ..memory.breakdown import Breakdown
from ..memory.inference import layer_weights_of, weights_bytes
from ..solve.feasibility import largest_fitting
from .llamacpp import (CTX_PAD, OP_OFFLOAD_MIN_BATCH, LlamaCppConfig, gpu_budget, llamacpp_buffers, llamacpp_split,
                       llamacpp_swa, weights_label)

B_g, B_h, W_g, W_h = sp.symbols("B_g B_h W_g W_h", positive=True)

DECODE_SECONDS = B_g / (W_g * 10**9) + B_h / (W_h * 10**9)
"""Seconds per decoded token, a bandwidth roofline: ``B_g`` bytes read from GPU memory at ``W_g`` GB/s plus ``B_h``
bytes read from host memory at ``W_h`` GB/s."""

share(DECODE_SECONDS=DECODE_SECONDS)

OFFLOAD_RUNTIMES = ("llama.cpp", "transformers")
"""Runtimes whose split is modelled: llama.cpp's ``-ngl``, and transformers' ``device_map="auto"`` (accelerate's
placement; offloaded layers run on the GPU with their weights copied over PCIe every forward). Ollama's own
estimate: not yet."""

ACCELERATE_SHARE = sp.Rational(9, 10)
"""accelerate's ``get_balanced_memory`` on one GPU keeps 90% of the free memory for the model ("10% for the buffer to
avoid OOM", accelerate v1.14.0 utils/modeling.py); bitsandbytes, quanto and bitnet quantizers take 90% of that."""
QUANTIZER_SHARE_FORMATS = ("nf4", "nf4-dq", "llm-int8")
"""Formats loaded through a quantizer that shrinks max_memory by another 10% (transformers' quantizer_bnb_*)."""


@settings_class
@dataclass(frozen=True)
class OffloadConfig(Settings):
    """A split between GPU and host: ``runtime``, ``host`` (a key of ``vramlib.catalog.hosts.HOSTS``: the DRAM and
    its bandwidth), ``host_ram`` (installed, e.g. ``"64GB"``), ``host_reserved`` (what the system and other programs
    keep: a convention, 4 GiB by default), ``n_gpu_layers`` (``-ngl``; None: the most that fit the GPU; -1: all),
    ``cpu_moe`` (``--cpu-moe``), ``context_tokens`` (tokens in context when a token is decoded; None: the whole
    ``n_ctx``) and ``llamacpp`` (the context's :class:`~vramlib.serve.llamacpp.LlamaCppConfig`)."""

    runtime: str = "llama.cpp"
    host: str = "ddr5-5600-2ch"
    host_ram: int | str = "64GB"
    host_reserved: int | str = "4GiB"
    n_gpu_layers: int | None = None
    cpu_moe: bool = False
    context_tokens: int | None = None
    llamacpp: LlamaCppConfig = field(default_factory=LlamaCppConfig)

    def __post_init__(self) -> None:
        from ..core.errors import check_choice

        object.__setattr__(self, "runtime", check_choice("runtime", self.runtime, OFFLOAD_RUNTIMES))
        object.__setattr__(self, "host", get_host(self.host).key)
        for name in ("host_ram", "host_reserved"):
            object.__setattr__(self, name, parse_memory(getattr(self, name), field=name))
        if self.host_reserved >= self.host_ram:
            raise InvalidValueError("host_reserved", self.host_reserved, "must be below host_ram")
        if self.runtime == "transformers" and self.n_gpu_layers is not None:
            raise InvalidValueError("n_gpu_layers", self.n_gpu_layers, "transformers places layers with "
                                    "device_map='auto' here; an explicit device_map is not modelled (give None)")
        if self.n_gpu_layers is not None and self.n_gpu_layers != -1:
            try:
                check_positive_int("n_gpu_layers", self.n_gpu_layers, allow_zero=True)
            except InvalidValueError:
                raise InvalidValueError("n_gpu_layers", self.n_gpu_layers, "give -ngl as llama.cpp takes it: 0 .. "
                                        "the layers + 1, -1 (all) or None (the most that fit)") from None
        if not isinstance(self.cpu_moe, bool):
            raise InvalidValueError("cpu_moe", self.cpu_moe, "must be True or False")
        if self.context_tokens is not None:
            check_positive_int("context_tokens", self.context_tokens)
        if not isinstance(self.llamacpp, LlamaCppConfig):
            raise InvalidValueError("llamacpp", self.llamacpp, "must be a LlamaCppConfig")


@portable
def decode_kv_read(m, bufs, split, tokens):
    """[GPU, host] bytes of K and V one decoded token reads with ``tokens`` in context: each layer's rows of the
    tokens it holds (a sliding-window layer at most its window), on the side its layer lives."""
    s = m["spec"]
    x = bufs[3]
    row = q_div(x["layer_kv"]["full"], x["cells"]["full"] * x["streams"])
    mixers = layer_types_of(s)
    n = len(mixers)
    first = n - split["layers_on_gpu"]
    out = [q(0), q(0)]
    for i in range(n):
        held = min(tokens, s["sliding_window"]) if mixers[i] == "sliding" and llamacpp_swa(s) else tokens
        side = 0 if i >= first else 1
        out[side] = q_add(out[side], q_mul(row, held))
    return out


@portable
def decode_rate(read_gpu, read_host, gpu_gb_s, host_gb_s):
    """[seconds per token, tokens per second] of DECODE_SECONDS (exact seconds; tokens/s as a float)."""
    t = ev("DECODE_SECONDS", None, {"B_g": read_gpu, "B_h": read_host, "W_g": q(gpu_gb_s), "W_h": q(host_gb_s)})
    return [t, 1 / q_float(t)]


@portable
def most_gpu_layers(m, lw, bufs, cpu_moe, budget):
    """The largest ``-ngl`` (0 .. layers + 1: the output layer, then the blocks from the last) whose GPU buffers fit
    ``budget`` bytes; -1 when not even -ngl 0 fits (a budget below 0)."""
    best = -1
    for ngl in range(len(lw[1]) + 2):
        split = llamacpp_split(m, lw, bufs, ngl, cpu_moe)
        used = 0
        for part in split["gpu"]:
            used += part[1]
        if used <= budget:
            best = ngl
    return best


@portable
def offload_core(m, lw, c, choice, side):
    """The whole split for the static book and :func:`offload_plan`: a model view, its weights layer by layer ``lw``
    (:func:`~vramlib.memory.inference.layer_weights_of`, or a GGUF file's own), a LlamaCppConfig's fields ``c``,
    ``choice`` = [n_gpu_layers (None: the most that fit), cpu_moe, tokens in context] and ``side`` = {budget,
    gpu_gb_s, host_gb_s}. Returns the split (:func:`~vramlib.serve.llamacpp.llamacpp_split`) with ``ngl``,
    ``read`` ([GPU, host] bytes per
    token, KV included) and ``rate`` ([seconds, tokens/s])."""
    bufs = llamacpp_buffers(m, c, True)
    ngl = choice[0]
    if ngl is None:
        ngl = most_gpu_layers(m, lw, bufs, choice[1], side["budget"])
        if ngl < 0:
            raise_problem(["gpu", side["budget"], "the CUDA context alone fills the card"])
    split = llamacpp_split(m, lw, bufs, ngl, choice[1])
    kv = decode_kv_read(m, bufs, split, choice[2])
    read = [q_add(split["read_gpu"], kv[0]), q_add(split["read_host"], kv[1])]
    split["ngl"] = ngl
    split["read"] = read
    split["rate"] = decode_rate(read[0], read[1], side["gpu_gb_s"], side["host_gb_s"])
    return split


@portable
def offload_verdict(x, n_layers, gpu_budget, host_budget):
    """One line on a split: -ngl and what it puts on the GPU, each side's memory against its budget, the roofline."""
    used = [0, 0]
    for part in x["gpu"]:
        used[0] += part[1]
    for part in x["host"]:
        used[1] += part[1]
    where = ("the output layer and " + str(x["layers_on_gpu"]) + " of " + str(n_layers) + " blocks on the GPU"
             if x["output_on_gpu"] else "every block in host memory")
    gpu = ("GPU " + bytes_text(used[0], 1) + " of " + bytes_text(gpu_budget, 1) +
           (" (does not fit)" if used[0] > gpu_budget else ""))
    host = ("host " + bytes_text(used[1], 1) + " of " + bytes_text(host_budget, 1) +
            (" (does not fit: pages would be read from disk)" if used[1] > host_budget else ""))
    return ("-ngl " + str(x["ngl"]) + ": " + where + "; " + gpu + ", " + host + ". Decode roofline: " +
            fmt_fixed(x["rate"][1], 1) + " tokens/s (" + bytes_text(q_ceil(x["read"][0]), 1) + " read on the GPU, " +
            bytes_text(q_ceil(x["read"][1]), 1) + " in host memory per token).")


def _layer_weights(m: ModelSpec, weights) -> list:
    """Layer-by-layer weights: a format name priced by its rules, or a GGUF file (``vl.read_gguf``) as stored."""
    if hasattr(weights, "layer_weights"):
        lw = weights.layer_weights()
        if len(lw[1]) != m.n_layers:
            raise InvalidValueError("weights", weights.path, f"the file has {len(lw[1])} blocks, {m.name} has "
                                    f"{m.n_layers}: give the file's own spec (its .spec)")
        return lw
    return layer_weights_of(m.view(), precision_view(get_precision(weights, field="weights")))


@dataclass(frozen=True)
class OffloadPlan:
    """A model split between a GPU and host memory: ``n_gpu_layers`` (the ``-ngl`` value), ``layers_on_gpu``,
    ``output_on_gpu``, ``gpu`` / ``host`` (Breakdowns), their budgets, whether each fits, the decode roofline
    (``seconds_per_token``, ``tokens_per_s``, with ``read_gpu`` / ``read_host`` bytes per token) and notes."""

    n_gpu_layers: int
    n_layers: int
    layers_on_gpu: int
    output_on_gpu: bool
    gpu: Breakdown
    host: Breakdown
    gpu_budget: int
    host_budget: int
    read_gpu: int
    read_host: int
    gpu_gb_s: float
    host_gb_s: float
    seconds_per_token: float
    tokens_per_s: float
    notes: tuple[str, ...]
    host_read_over: str = "host memory"
    """What the host side's bytes cross at ``host_gb_s``: host memory (llama.cpp's CPU layers) or PCIe (transformers'
    offloaded layers, copied to the GPU)."""

    @property
    def fits_gpu(self) -> bool:
        return self.gpu.total <= self.gpu_budget

    @property
    def fits_host(self) -> bool:
        return self.host.total <= self.host_budget

    def decode_terms(self) -> list[dict]:
        """The roofline's two terms (DECODE_SECONDS, one side at a time): bytes one token reads, the bandwidth, the
        milliseconds they take; and their sum."""
        rows = []
        for name, read, gb_s in (("GPU memory", self.read_gpu, self.gpu_gb_s), (self.host_read_over, self.read_host,
                                                                               self.host_gb_s)):
            t = float(decode_rate(read, 0, gb_s, gb_s)[0])
            rows.append({"read from": name, "GB per token": read / 1e9, "GB/s": gb_s, "ms": t * 1e3})
        rows.append({"read from": "both", "GB per token": (self.read_gpu + self.read_host) / 1e9, "GB/s": None,
                     "ms": self.seconds_per_token * 1e3})
        return rows


def _notes(m: ModelSpec, card: GPU, c: OffloadConfig, how: str, tokens: int) -> tuple[str, ...]:
    host = get_host(c.host)
    return (f"llama.cpp at commit 0c1e57098, -ngl as it counts (the output layer first, then the blocks from the "
            f"last; -ngl {m.n_layers + 1} is all); GPU budget: {how}",
            f"host: {host.name}, {float(host.bandwidth_gb_s):g} GB/s theoretical; {c.host_reserved:,} B kept for the "
            "system (a convention)",
            f"decode roofline at {tokens:,} tokens in context: every weight a token uses read once where it lives, "
            "plus each layer's K and V; an upper bound (kernels, CPU cores and NUMA not modelled)",
            "compute buffers estimated from llama.cpp's source, not measured: the GPU's is the context's plus room for "
            "the largest host weight copied over for a prompt batch; the host's the context's when blocks run there; "
            "prompt-processing speed is not modelled") + (
            ("compute buffer of routed-expert layers: the dense rule at the k routed experts' width, an estimate "
             "(llama.cpp's MoE graphs were not measured)",) if m.n_experts else ())


@checked_call
def offload_plan(model: ModelSpec | str, gpu: GPU | str, weights: str = "q4_k_m", config: OffloadConfig | None = None,
                 **settings) -> OffloadPlan:
    """Split ``model`` in ``weights`` between ``gpu`` and host memory as llama.cpp does (module doc): with
    ``n_gpu_layers=None`` the most layers whose GPU buffers fit, the memory on each side and the decode roofline.
    ``config``: an :class:`OffloadConfig`, or its fields as keywords (``host="ddr5-5600-2ch", host_ram="64GB",
    n_gpu_layers=40, cpu_moe=True, llamacpp=LlamaCppConfig(n_ctx=8192)``)."""
    m = get_model(model)
    card = get_gpu(gpu)
    c = OffloadConfig.build("offload_plan", config, settings, field="config", also=("model", "gpu", "weights"))
    if c.cpu_moe and not m.n_experts:
        raise InvalidValueError("cpu_moe", True, f"{m.name} has no routed experts")
    if c.runtime == "transformers":
        return _transformers_plan(m, card, weights, c)
    host = get_host(c.host)
    budget, how = gpu_budget(card)
    tokens = c.context_tokens or c.llamacpp.n_ctx
    x = offload_core(m.view(), _layer_weights(m, weights), Fields(c.llamacpp), [c.n_gpu_layers, c.cpu_moe, tokens],
                     {"budget": budget, "gpu_gb_s": card.bandwidth_gb_s, "host_gb_s": float(host.bandwidth_gb_s)})
    title = f"{m.name} {weights_label(weights)} on {card.key} + {host.key}, -ngl {x['ngl']}"
    return OffloadPlan(
        n_gpu_layers=x["ngl"], n_layers=m.n_layers, layers_on_gpu=x["layers_on_gpu"], output_on_gpu=x["output_on_gpu"],
        gpu=Breakdown(dict(x["gpu"]), title=title + ": GPU"),
        host=Breakdown({k: v for k, v in x["host"] if v or k == "model buffer"}, title=title + ": host"),
        gpu_budget=budget, host_budget=c.host_ram - c.host_reserved, read_gpu=int(x["read"][0]),
        read_host=int(x["read"][1]), gpu_gb_s=float(card.bandwidth_gb_s), host_gb_s=float(host.bandwidth_gb_s),
        seconds_per_token=float(x["rate"][0]), tokens_per_s=x["rate"][1], notes=_notes(m, card, c, how, tokens))


def _accelerate_split(lw: list, budget: int) -> tuple[int, bool, int]:
    """accelerate's ``infer_auto_device_map`` on one GPU: the modules in order (embeddings, the layers, the final norm
    with the LM head) while they fit ``budget`` less the largest layer (kept free for it), the rest on the CPU.
    Returns (layers on the GPU, whether the output went too, the largest layer's bytes)."""
    largest = max(x[0] for x in lw[1])
    room = budget - largest
    used = dict(lw[0]).get("embed", 0)
    if used > room:
        return 0, False, largest
    on = 0
    for x in lw[1]:
        if used + x[0] > room:
            return on, False, largest
        used += x[0]
        on += 1
    out = sum(b for k, b in lw[0] if k != "embed")
    return on, used + out <= room, largest


def _transformers_plan(m: ModelSpec, card: GPU, weights: str, c: OffloadConfig) -> OffloadPlan:
    """``device_map="auto"`` on one GPU (module doc of OFFLOAD_RUNTIMES): accelerate's placement; at decode every
    weight is read on the GPU and the offloaded ones also cross PCIe first; the KV cache of every layer lives on the
    GPU (the offloaded layers execute there), with one offloaded layer's weights at a time."""
    from ..catalog.hosts import host_link_gb_s
    from ..memory.inference import kv_cache_bytes

    p = get_precision(weights, field="weights")
    if p.gguf is not None:
        raise InvalidValueError("weights", weights, "a GGUF mix is llama.cpp's format; transformers loads fp16/bf16, "
                                "GPTQ/AWQ, bitsandbytes or FP8 checkpoints")
    lw = layer_weights_of(m.view(), precision_view(p))
    free = gpu_budget(card)[0]
    share_ = ACCELERATE_SHARE * (ACCELERATE_SHARE if p.name in QUANTIZER_SHARE_FORMATS else 1)
    on, out_gpu, largest = _accelerate_split(lw, int(free * share_))
    layer_w = [x[0] for x in lw[1]]
    outside = dict(lw[0])
    head = sum(b for k, b in lw[0] if k != "embed")
    resident = outside.get("embed", 0) * (1 if on or out_gpu else 0) + sum(layer_w[:on]) + (head if out_gpu else 0)
    streamed = sum(layer_w[on:]) + (0 if out_gpu else head) + (0 if on or out_gpu else outside.get("embed", 0))
    tokens = c.context_tokens or c.llamacpp.n_ctx
    kv = kv_cache_bytes(m, tokens, dtype="bf16" if p.name != "fp16" else "fp16")
    link = float(host_link_gb_s(card.key))
    read_g = resident + streamed + kv - (outside.get("embed", 0) if on or out_gpu else 0)
    t, rate = decode_rate(read_g, streamed, float(card.bandwidth_gb_s), link)
    gpu = Breakdown({"weights (resident)": resident, "kv cache (DynamicCache)": kv,
                     "offloaded layer in flight": largest if streamed else 0},
                    title=f"{m.name} {weights} on {card.key}, device_map='auto': GPU")
    host = Breakdown({"offloaded weights": streamed}, title=f"{m.name} {weights}, device_map='auto': host")
    notes = (f"transformers + accelerate v1.14.0, device_map='auto': {on} of {m.n_layers} layers on the GPU "
             f"(90% of the free memory, less the largest layer), the rest copied over PCIe ({link:.1f} GB/s) on every "
             "forward (AlignDevicesHook)",
             "decode roofline: every weight read on the GPU, the offloaded ones first sent over PCIe, the KV cache "
             "of every layer on the GPU; activations and the copy's pageable-memory overhead not modelled")
    return OffloadPlan(n_gpu_layers=on, n_layers=m.n_layers, layers_on_gpu=on, output_on_gpu=out_gpu, gpu=gpu,
                       host=host, gpu_budget=free, host_budget=c.host_ram - c.host_reserved, read_gpu=read_g,
                       read_host=streamed, gpu_gb_s=float(card.bandwidth_gb_s), host_gb_s=link,
                       seconds_per_token=float(t), tokens_per_s=rate, notes=notes,
                       host_read_over="PCIe, host to GPU")


@checked_call
def offload_sweep(model: ModelSpec | str, gpu: GPU | str, weights: str = "q4_k_m",
                  config: OffloadConfig | None = None, **settings) -> list[OffloadPlan]:
    """:func:`offload_plan` at every ``-ngl`` from 0 (all in host memory) to the layers + 1 (all on the GPU)."""
    m = get_model(model)
    c = OffloadConfig.build("offload_sweep", config, settings, field="config", also=("model", "gpu", "weights"))
    return [offload_plan(m, gpu, weights, c.with_(n_gpu_layers=k)) for k in range(m.n_layers + 2)]


@dataclass(frozen=True)
class DevicePlan:
    """A model on one memory, with no GPU of its own: an Apple silicon Mac (unified memory, Metal's working-set
    limit) or a CPU (host RAM less ``host_reserved``). ``memory`` (a Breakdown of llama.cpp's buffers), ``budget``,
    ``fits``, the decode roofline (``read`` bytes per token at ``gb_s``) and notes."""

    device: str
    memory: Breakdown
    budget: int
    read: int
    gb_s: float
    tokens_per_s: float
    notes: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.budget


@checked_call
def device_plan(model: ModelSpec | str, device: str, weights: str = "q4_k_m", config: OffloadConfig | None = None,
                **settings) -> DevicePlan:
    """``model`` in ``weights`` on one memory as llama.cpp runs it there: ``device`` a Mac of
    ``vramlib.catalog.hosts.MACS`` (every layer on the Metal device; budget: ``recommendedMaxWorkingSetSize``,
    METAL_WORKING_SET) or a host memory of ``HOSTS`` (the CPU backend; budget: ``host_ram - host_reserved`` of the
    ``config``). Decode roofline: every weight a token uses and the context's K and V, read at the memory's
    bandwidth."""
    m = get_model(model)
    c = OffloadConfig.build("device_plan", config, settings, field="config", also=("model", "device", "weights"))
    if device in MACS:
        mac = MACS[device]
        budget, bw, name = mac.working_set_bytes, float(mac.bandwidth_gb_s), mac.name
        how = f"Metal's default working set ({budget:,} B of {mac.memory_bytes:,} B: METAL_WORKING_SET)"
    else:
        if device not in HOSTS:
            raise UnknownNameError("device", device, list(MACS) + list(HOSTS))
        host = HOSTS[device]
        budget, bw, name = c.host_ram - c.host_reserved, float(host.bandwidth_gb_s), host.name
        how = f"host RAM {c.host_ram:,} B less {c.host_reserved:,} B for the system"
    x = offload_core(m.view(), _layer_weights(m, weights), Fields(c.llamacpp),   # every layer on the one device
                     [-1, False, c.context_tokens or c.llamacpp.n_ctx],
                     {"budget": budget, "gpu_gb_s": bw, "host_gb_s": bw})
    parts = dict(x["gpu"])
    parts["output buffer"] = dict(x["host"])["output buffer"]
    return DevicePlan(device=device, memory=Breakdown(parts, title=f"{m.name} {weights_label(weights)} on {name}"),
                      budget=budget, read=int(x["read"][0]), gb_s=bw, tokens_per_s=x["rate"][1],
                      notes=(f"budget: {how}", "decode roofline: an upper bound at the memory's announced bandwidth",
                             "llama.cpp at commit 0c1e57098; weights as a GGUF file stores them"))


@checked_call
def device_max_ctx(model: ModelSpec | str, device: str, weights: str = "q4_k_m", config: OffloadConfig | None = None,
                   **settings) -> int:
    """The longest ``n_ctx`` (a multiple of 256, as llama.cpp pads it) whose buffers fit one memory
    (:func:`device_plan`: a Mac's Metal working set, or a CPU's RAM less the system's share); 0 if not even 256
    tokens fit."""
    m = get_model(model)
    c = OffloadConfig.build("device_max_ctx", config, settings, field="config", also=("model", "device", "weights"))

    def fits(k: int) -> bool:
        return device_plan(m, device, weights, c.with_(llamacpp=c.llamacpp.with_(n_ctx=k * CTX_PAD))).fits

    return CTX_PAD * largest_fitting(fits, 1, None, 2**24, field="n_ctx")


@checked_call
def device_fit_map(models: list[str], devices: list[str], precisions: list[str],
                   config: OffloadConfig | None = None, **settings) -> list[dict]:
    """:func:`vramlib.serve.serving.fit_map`'s rows for Macs and CPUs (llama.cpp on one memory): per device x model x
    GGUF format, whether it loads at 256 tokens and the longest context, capped at the model's trained context for
    ``usable context``. :func:`vramlib.serve.serving.plot_fit_map` draws them."""
    c = OffloadConfig.build("device_fit_map", config, settings, field="config",
                            also=("models", "devices", "precisions"))
    rows = []
    for d in devices:
        for model in models:
            mm = get_model(model)
            for prec in precisions:
                ctx = device_max_ctx(mm, d, prec, c)
                usable = min(ctx, mm.max_context)
                rows.append({"gpu": d, "n_gpus": 1, "model": mm.name, "precision": prec,
                             "weights GB": gb(weights_bytes(mm, prec)), "fits": bool(ctx), "max context": ctx,
                             "usable context": usable, "trained context": mm.max_context,
                             "verdict": f"fits: {usable:,} tokens" if ctx else "does not fit at 256 tokens"})
    return rows


@checked_call
def recommend_devices(model: ModelSpec | str, weights: str = "q4_k_m", config: OffloadConfig | None = None,
                      **settings) -> list[dict]:
    """Every catalogue device that runs ``model`` in llama.cpp at the config's context, fastest decode first: each
    GPU (every layer on it, or split with the config's host memory and RAM: :func:`offload_plan`), each Mac
    (:func:`device_plan` under Metal's working set) and each host memory alone (the config's RAM). A row: device,
    kind ("GPU", "GPU + host", "Mac", "CPU"), -ngl for GPUs, GB on the device, the roofline's tokens/s, the
    hourly price where the catalogue has one; devices where it does not fit are left out."""
    from ..catalog.hardware import list_gpus

    m = get_model(model)
    c = OffloadConfig.build("recommend_devices", config, settings, field="config", also=("model", "weights"))
    rows = []
    for card in list_gpus():
        p = offload_plan(m, card, weights, c)
        if p.fits_gpu and p.fits_host:
            whole = p.output_on_gpu and p.layers_on_gpu == m.n_layers
            rows.append({"device": card.key, "kind": "GPU" if whole else "GPU + host", "-ngl": p.n_gpu_layers,
                         "GB on the device": gb(p.gpu.total), "tokens/s": p.tokens_per_s,
                         "USD/hour": card.price_per_hour_usd})
    for key in list(MACS) + list(HOSTS):
        d = device_plan(m, key, weights, c)
        if d.fits:
            rows.append({"device": key, "kind": "Mac" if key in MACS else "CPU", "-ngl": None,
                         "GB on the device": gb(d.memory.total), "tokens/s": d.tokens_per_s, "USD/hour": None})
    return sorted(rows, key=lambda r: -r["tokens/s"])


__all__ = ["ACCELERATE_SHARE", "decode_kv_read", "decode_rate", "DECODE_SECONDS", "device_fit_map", "device_max_ctx",
           "device_plan", "DevicePlan", "llamacpp_split", "most_gpu_layers", "offload_core", "offload_plan",
           "OFFLOAD_RUNTIMES", "offload_sweep", "offload_verdict", "OffloadConfig", "OffloadPlan",
           "OP_OFFLOAD_MIN_BATCH", "QUANTIZER_SHARE_FORMATS", "recommend_devices"]
