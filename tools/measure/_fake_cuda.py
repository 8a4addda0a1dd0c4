"""Fake CUDA on a CPU-only PyTorch, for MemTracker runs under ``FakeTensorMode`` (issue 13).

``FakeTensorMode`` gives tensors a device without storage, so ``torch.empty(..., device="cuda")`` works on a
machine without CUDA -- until autograd or a ``DeviceGuard`` asks c10 for the CUDA device-guard implementation,
which a CPU-only build does not register ("PyTorch is not linked with support for cuda devices"; the process
aborts). c10 ships ``c10::impl::FakeGuardImpl<DeviceType::CUDA>`` for its own tests; :func:`install` compiles a
small extension with ``torch.utils.cpp_extension.load_inline`` that registers it (``C10_REGISTER_GUARD_IMPL``)
and gives the CUDA hooks object, which torch made at import as a stub, a virtual table that reports CUDA (autograd's
``InputBuffer`` asks ``at::getAccelerator`` for the current stream), once per machine (the build is cached under
``TORCH_EXTENSIONS_DIR``, about a minute the first time).

What else had to be done so that the CUDA code paths are the ones measured (``step_peaks.py`` checks one case
against the fake CPU device of ``peaks.py``):

* ``torch.cuda.is_available()`` stays False (there is no driver); the model is built on the fake ``cuda`` device
  explicitly. ``torch.autocast("cuda")`` would disable itself on such a machine (``amp_definitely_not_available``)
  -- and so would the autocast that ``torch.utils.checkpoint`` re-enters when it recomputes a layer -- so
  :func:`install` makes that check, ``torch.cuda.is_bf16_supported`` and ``torch.cuda.get_device_capability``
  answer as on a Hopper GPU (9.0: transformers' MoE experts then take ``grouped_mm``, as on an H100); autocast
  itself is a dispatch key and needs no device.
* SDPA: on fake tensors the backend choice cannot query the GPU (``torch.backends.cuda`` reads device properties),
  so :func:`sdpa_backend` pins it with ``torch.nn.attention.sdpa_kernel`` and the run records which one it asked;
  the fake kernel (meta function) of the flash / memory-efficient backend allocates exactly what the CUDA kernel
  returns (the output and the log-sum-exp), which is what MemTracker counts.
* bitsandbytes' 8-bit AdamW (:func:`bnb_adamw8bit`): its quantisation maps are computed from real values, so they
  are made before the fake tensors (real CPU tensors, which the fake mode accepts), and its ``sync_gpu`` (a
  ``torch.cuda.synchronize``) is a no-op; its update kernel is a ``torch.library`` op with a fake implementation.
* ``torch.optim`` chooses ``foreach`` by default only for CUDA tensors and *fused* never by default; the harness
  always passes ``foreach=`` / ``fused=`` explicitly, so the implementation measured is the one named.
"""
from __future__ import annotations

import functools

SOURCE = r"""
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>
#include <torch/extension.h>
namespace {
C10_REGISTER_GUARD_IMPL(CUDA, c10::impl::FakeGuardImpl<c10::DeviceType::CUDA>);
struct FakeCUDAHooks : at::CUDAHooksInterface {
  FakeCUDAHooks(at::CUDAHooksArgs) {}
  void init() const override {}
  bool isBuilt() const override { return true; }
  bool hasCUDA() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  int getNumGPUs() const override { return 1; }
};
}
int registered() {
  // getCUDAHooks() made its stub object when torch was imported; give that object this class's virtual table
  // (placement new: the interface has no data members, so the sizes are equal and nothing else refers to it).
  static_assert(sizeof(FakeCUDAHooks) == sizeof(at::CUDAHooksInterface));
  auto* hooks = const_cast<at::CUDAHooksInterface*>(&at::detail::getCUDAHooks());
  if (!hooks->hasCUDA()) new (hooks) FakeCUDAHooks(at::CUDAHooksArgs{});
  return at::detail::getCUDAHooks().hasCUDA() ? 1 : 0;
}
"""


@functools.cache
def install() -> bool:
    """Register c10's fake CUDA device guard (compiling the extension on first use). True once registered."""
    import torch
    from torch.utils.cpp_extension import load_inline

    if torch.cuda.is_available():       # a real GPU: its own guard is registered
        return True
    import torch.cuda.amp.common

    torch.cuda.amp.common.amp_definitely_not_available = lambda: False
    torch.cuda.is_bf16_supported = lambda including_emulation=True: True
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    mod = load_inline("vram_book_fake_cuda_guard", cpp_sources=SOURCE, functions=["registered"],
                      extra_cflags=["-O0"], verbose=False)
    return bool(mod.registered())


SDPA_BACKENDS = ("flash", "efficient", "math")


def sdpa_backend(name: str):
    """A context that pins scaled_dot_product_attention to one backend (flash | efficient | math)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                        "math": SDPBackend.MATH}[name])


def flash_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """``scaled_dot_product_attention`` as the CUDA dispatcher runs it for transformers' calls without a mask in
    bf16/fp16 with head_dim <= 256: FlashAttention-2 (``aten._scaled_dot_product_flash_attention``; a key/value
    with fewer heads than the query is passed as is, which the CUDA kernel supports natively under ``enable_gqa``).
    On fake tensors the dispatcher's own choice (``_fused_sdp_choice``) has no CUDA kernel, so the harness installs
    this in its place; any call it does not cover raises instead of measuring another kernel."""
    import torch

    if torch.is_autocast_enabled("cuda"):      # SDPA is on CUDA autocast's lower-precision list: it casts q, k, v
        # (this function replaces the Python entry point, above the dispatcher, so it does the cast itself)
        low = torch.get_autocast_dtype("cuda")
        query, key, value = (x.to(low) for x in (query, key, value))
    if attn_mask is not None or query.dtype not in (torch.bfloat16, torch.float16) or query.shape[-1] > 256 \
            or query.shape[-1] % 8:
        raise NotImplementedError("fake CUDA SDPA covers the flash path only (no mask, half precision, "
                                  "head_dim <= 256 and a multiple of 8)")
    if key.shape[1] != query.shape[1] and not enable_gqa:
        raise NotImplementedError("fewer key/value heads than query heads without enable_gqa")
    return torch.ops.aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False,
                                                             scale=scale)[0]


def as_eager_masks() -> None:
    """Make transformers build the attention masks it builds for real tensors. It treats a fake tensor as a traced
    one (``is_tracing``), and then cannot read the position ids to see that a batch holds one sequence per row
    (``find_packed_sequence_indices``): it assumes packed sequences and materialises a boolean T x T mask, which
    also steers SDPA away from FlashAttention. With real tensors and no padding it returns None (``is_causal``
    instead of a mask); the harness never packs sequences, so that answer is the one a GPU run gets."""
    import transformers.masking_utils as mu

    mu.find_packed_sequence_indices = lambda position_ids: None


def bnb_adamw8bit(params, **kw):
    """``bitsandbytes.optim.AdamW8bit(params, **kw)`` on fake CUDA tensors (see the module doc)."""
    import bitsandbytes.functional as bf
    import bitsandbytes.optim.optimizer as bo
    import bitsandbytes.utils as bu
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    import bitsandbytes as bnb

    with unset_fake_temporarily():
        maps = {signed: bf.create_dynamic_map(signed=signed) for signed in (True, False)}
    bf.create_dynamic_map = lambda signed=True, *a, **k: maps[signed]
    bu.sync_gpu = bo.sync_gpu = lambda t: None
    return bnb.optim.AdamW8bit(params, **kw)


class set_data_moves:
    """While active, ``Module.to(device, dtype)`` moves parameters and buffers with ``p.data = p.data.to(...)``.

    ``Module._apply`` swaps a FakeTensor parameter for its converted copy (``torch.utils.swap_tensors``), which fails
    when a weak reference to it exists -- and the fake mode keeps one -- so peft cannot move a new adapter to its
    base layer's device and dtype (``_move_adapter_to_device_of_base_layer``). ``p.data = ...`` changes a fake
    tensor's dtype but not its (Python-level) fake device, so the harness builds the peft model inside this context
    *and* under ``torch.device("cuda")``: the adapters are made on the device and only their dtype moves here; the
    bytes are the same (one tensor of the target dtype per parameter)."""

    def __enter__(self):
        import torch

        self.orig = torch.nn.Module.to

        def to(module, *args, **kwargs):
            device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
            for t in list(module.parameters()) + list(module.buffers()):
                keep = dtype if dtype is not None and (t.is_floating_point() or t.is_complex()) else t.dtype
                t.data = t.data.to(device or t.device, dtype=keep)
            return module

        torch.nn.Module.to = to
        return self

    def __exit__(self, *exc):
        import torch

        torch.nn.Module.to = self.orig
        return False
