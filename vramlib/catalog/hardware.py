"""GPU catalogue: how much memory each card really has, how fast it is, what it costs.

Every entry records the memory *as the card reports it* (``nvidia-smi`` "Total"
MiB, or ``rocm-smi`` bytes for AMD), not the marketing "80 GB", because that is
the ceiling a model, its activations and its KV cache must fit under. Each
memory figure names where it was seen (``memory_source``); throughput figures
are dense (no 2:4 sparsity) tensor-core numbers from the vendor datasheet
(``spec_source``); prices are indicative on-demand rates with a provider and a
month (``price_source``, ``price_date``) -- check the provider before you budget.

Used in: chapters 1, 5, 6, 8, 9, 11, 12.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..core.errors import InvalidValueError, UnknownNameError
from ..core.units import parse_memory
from ..core.portable import Fields, infinity, portable, stable_order

__all__ = ["GPU", "GPUS", "capacity_bytes", "get_gpu", "list_gpus", "normalise_gpu_name"]

MIB = 2**20
GIB = 2**30

_KEY_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_NVIDIA_CC_RE = re.compile(r"^\d+\.\d+$")
_AMD_ARCH_RE = re.compile(r"^gfx[0-9a-f]+$")
_DATE_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")

# AMD architectures with BF16 matrix cores (CDNA2 MI200 = gfx90a, CDNA3 MI300 = gfx942, CDNA4 MI350 = gfx950).
_AMD_BF16_ARCHS = frozenset({"gfx90a", "gfx942", "gfx950"})
# FlashAttention-2 on AMD: the ROCm fork (github.com/ROCm/flash-attention, Composable Kernel
# backend, also what vLLM/PyTorch ROCm builds use) supports MI200 (gfx90a) and MI300 (gfx942).
# Upstream Dao-AILab FA2 is CUDA-only; this is the ROCm port, not the same binary.
_AMD_FA2_ARCHS = frozenset({"gfx90a", "gfx942"})


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class GPU:
    """One accelerator model: memory as reported, bandwidth, dense TFLOP/s, links and price."""

    key: str
    name: str
    memory_bytes: int
    memory_source: str
    bandwidth_gb_s: float
    bf16_tflops: float | None
    fp16_tflops: float
    fp8_tflops: float | None
    compute_capability: str
    vendor: str
    interconnect: str
    interconnect_gb_s: float
    price_per_hour_usd: float | None
    price_date: str
    price_source: str
    spec_source: str
    cuda_total_bytes: int | None = None
    """What CUDA reports as the card's total (``cudaMemGetInfo``, PyTorch's "total capacity"): the smallest figure in
    published logs, exact bytes of the logged value (GiB to two decimals, or bytes where printed); None where no log is
    published. Below ``memory_bytes`` by what the driver reserves."""
    cuda_total_source: str = ""

    def __post_init__(self) -> None:
        """Reject an entry with a missing, non-positive or inconsistent field (names the field)."""
        for field in ("key", "name", "memory_source", "interconnect", "spec_source"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value.strip():
                raise InvalidValueError(field, value, "must be a non-empty string")
        if not _KEY_RE.match(self.key):
            raise InvalidValueError("key", self.key, "must be lower-case letters/digits joined by hyphens, e.g. 'a100-80gb'")
        if not isinstance(self.memory_bytes, int) or isinstance(self.memory_bytes, bool) or self.memory_bytes <= 0:
            raise InvalidValueError("memory_bytes", self.memory_bytes, "must be a positive integer number of bytes")
        for field in ("bandwidth_gb_s", "fp16_tflops", "interconnect_gb_s"):
            value = getattr(self, field)
            if not _is_number(value) or value <= 0:
                raise InvalidValueError(field, value, "must be a positive finite number")
        for field in ("bf16_tflops", "fp8_tflops", "price_per_hour_usd"):
            value = getattr(self, field)
            if value is not None and (not _is_number(value) or value <= 0):
                raise InvalidValueError(field, value, "must be a positive finite number or None")
        if self.vendor not in ("nvidia", "amd"):
            raise InvalidValueError("vendor", self.vendor, "must be 'nvidia' or 'amd'")
        cc = self.compute_capability
        if self.vendor == "nvidia" and not (isinstance(cc, str) and _NVIDIA_CC_RE.match(cc)):
            raise InvalidValueError("compute_capability", cc, "must be 'major.minor' for an NVIDIA GPU, e.g. '8.0'")
        if self.vendor == "amd" and not (isinstance(cc, str) and _AMD_ARCH_RE.match(cc)):
            raise InvalidValueError("compute_capability", cc, "must be a gfx architecture for an AMD GPU, e.g. 'gfx942'")
        if (self.bf16_tflops is not None) != self.supports_bf16:
            raise InvalidValueError(
                "bf16_tflops", self.bf16_tflops,
                f"must be {'a number' if self.supports_bf16 else 'None'} for compute capability {cc}",
            )
        if self.cuda_total_bytes is not None:
            t = self.cuda_total_bytes
            if not isinstance(t, int) or isinstance(t, bool) or not 0 < t <= self.memory_bytes:
                raise InvalidValueError("cuda_total_bytes", t, "must be None or whole bytes in (0, memory_bytes]")
            if not self.cuda_total_source.strip():
                raise InvalidValueError("cuda_total_source", self.cuda_total_source, "name the log a CUDA total comes from")
        if not isinstance(self.price_date, str) or not isinstance(self.price_source, str):
            raise InvalidValueError("price_date", self.price_date, "must be a string (may be empty when there is no price)")
        if self.price_per_hour_usd is not None:
            if not _DATE_RE.match(self.price_date):
                raise InvalidValueError("price_date", self.price_date, "must be 'YYYY-MM' when a price is given")
            if not self.price_source.strip():
                raise InvalidValueError("price_source", self.price_source, "must name the provider when a price is given")

    @property
    def _cc_tuple(self) -> tuple[int, int]:
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    @property
    def supports_bf16(self) -> bool:
        """Whether the tensor/matrix cores do BF16 (NVIDIA Ampere, 8.0, and later; AMD MI200/MI300)."""
        if self.vendor == "amd":
            return self.compute_capability in _AMD_BF16_ARCHS
        return self._cc_tuple >= (8, 0)

    @property
    def supports_flash_attention_2(self) -> bool:
        """Whether FlashAttention-2 runs (NVIDIA Ampere/Ada/Hopper/Blackwell, cc >= 8.0; AMD MI200/MI300 via the ROCm fork).

        Turing (T4, 7.5) and Volta (V100, 7.0) are not supported by FlashAttention-2.
        """
        if self.vendor == "amd":
            return self.compute_capability in _AMD_FA2_ARCHS
        return self._cc_tuple >= (8, 0)

    @property
    def memory_mib(self) -> float:
        """Memory in MiB (2**20 bytes), the unit nvidia-smi prints."""
        return self.memory_bytes / MIB

    @property
    def memory_gib(self) -> float:
        """Memory in GiB (2**30 bytes), the unit PyTorch's memory reports use."""
        return self.memory_bytes / GIB

    @property
    def memory_gb(self) -> float:
        """Memory in GB (10**9 bytes), the unit datasheets use."""
        return self.memory_bytes / 1e9


def _mib(n: int) -> int:
    return n * MIB


def _logged_gib(*figures: str) -> int:
    """Exact bytes of the smallest "X.XX GiB" total capacity among published logs."""
    return min(parse_memory(x + "GiB") for x in figures)


# Where a figure comes from. nvidia-smi totals were found in public GitHub issues and logs
# (search of stored public material); the issue named is one place to see it, not the only one.
# Interconnect: the GPU-to-GPU figure as the vendor states it (NVLink figures are the vendor's
# total bidirectional number). Cards whose NVLink needs an optional bridge (RTX 3090, RTX A6000,
# RTX A5000, H100 PCIe) are given their PCIe figure, since cloud instances rarely have the bridge;
# the bridge is named in `interconnect`.
# TFLOP/s: dense, tensor cores; for GeForce cards (RTX 3090/4090), the FP32-accumulate rate
# (what PyTorch matmuls use), which is half the FP16-accumulate rate NVIDIA headlines.
_CATALOGUE: tuple[GPU, ...] = (
    GPU(
        key="t4", name="NVIDIA T4",
        memory_bytes=_mib(15360),
        memory_source="nvidia-smi: 15360 MiB (Tesla T4; listed in modal-labs/modal-client PR #2797 and many public logs)",
        bandwidth_gb_s=320.0, bf16_tflops=None, fp16_tflops=65.0, fp8_tflops=None,
        compute_capability="7.5", vendor="nvidia",
        interconnect="PCIe 3.0 x16 (32 GB/s)", interconnect_gb_s=32.0,
        price_per_hour_usd=0.35, price_date="2025-06",
        price_source="Google Cloud GPU pricing, NVIDIA T4 GPU only (VM extra), us-central1",
        spec_source="NVIDIA T4 Tensor Core GPU datasheet (65 TFLOPS mixed-precision FP16)",
        cuda_total_bytes=_logged_gib("14.56", "14.74", "14.75"),
        cuda_total_source=("PyTorch out-of-memory messages: 'total capacity of 14.56 GiB' (GCP Tesla T4, Zheng-Chong/CatVTON issue #133), 14.74 and 14.75 GiB (Colab T4, zai-org/CogVideo issue #741, hpcaitech/Open-Sora issue #697)"),
    ),
    GPU(
        key="v100-16gb", name="NVIDIA Tesla V100 SXM2 16GB",
        memory_bytes=_mib(16384),
        memory_source=("nvidia-smi: 16384 MiB (Tesla V100-SXM2-16GB, driver 570; 1CatAI/1Cat-vLLM issue #85); "
                       "older drivers print 16160 MiB"),
        bandwidth_gb_s=900.0, bf16_tflops=None, fp16_tflops=125.0, fp8_tflops=None,
        compute_capability="7.0", vendor="nvidia",
        interconnect="NVLink 2 (300 GB/s)", interconnect_gb_s=300.0,
        price_per_hour_usd=3.06, price_date="2025-06",
        price_source="AWS EC2 on-demand, p3.2xlarge (1x V100 16GB), us-east-1",
        spec_source="NVIDIA Tesla V100 datasheet (SXM2: 125 TFLOPS tensor, 900 GB/s)",
    ),
    GPU(
        key="v100-32gb", name="NVIDIA Tesla V100 SXM2 32GB",
        memory_bytes=_mib(32768),
        memory_source=("nvidia-smi: 32768 MiB (Tesla V100-SXM2-32GB, recent drivers, several public logs); "
                       "older drivers print 32510 MiB"),
        bandwidth_gb_s=900.0, bf16_tflops=None, fp16_tflops=125.0, fp8_tflops=None,
        compute_capability="7.0", vendor="nvidia",
        interconnect="NVLink 2 (300 GB/s)", interconnect_gb_s=300.0,
        price_per_hour_usd=3.90, price_date="2025-06",
        price_source="AWS EC2 on-demand, p3dn.24xlarge ($31.212/h for 8x V100 32GB) per-GPU share, us-east-1",
        spec_source="NVIDIA Tesla V100 datasheet (SXM2: 125 TFLOPS tensor, 900 GB/s)",
        cuda_total_bytes=_logged_gib("31.74"),
        cuda_total_source=("PyTorch out-of-memory messages: '31.74 GiB total capacity' (V100 32GB; liucongg/ChatGLM-Finetuning issue #73, haotian-liu/LLaVA issue #812)"),
    ),
    GPU(
        key="a10", name="NVIDIA A10",
        memory_bytes=_mib(23028),
        memory_source=("nvidia-smi: 23028 MiB (modal-labs/modal-client PR #2797; NVML total 24146608128 B in "
                       "mayooot/detect-gpu issue #3); some older-driver logs print 22731 MiB"),
        bandwidth_gb_s=600.0, bf16_tflops=125.0, fp16_tflops=125.0, fp8_tflops=None,
        compute_capability="8.6", vendor="nvidia",
        interconnect="PCIe 4.0 x16 (64 GB/s)", interconnect_gb_s=64.0,
        price_per_hour_usd=0.75, price_date="2025-06",
        price_source="Lambda Cloud on-demand, 1x A10 (24 GB PCIe)",
        spec_source="NVIDIA A10 Tensor Core GPU datasheet (125 TFLOPS BF16/FP16 dense, 600 GB/s)",
    ),
    GPU(
        key="a10g", name="NVIDIA A10G",
        memory_bytes=_mib(23028),
        memory_source="nvidia-smi: 23028 MiB (NVIDIA A10G on AWS g5; NVIDIA/DCGM issue #232)",
        bandwidth_gb_s=600.0, bf16_tflops=70.0, fp16_tflops=70.0, fp8_tflops=None,
        compute_capability="8.6", vendor="nvidia",
        interconnect="PCIe 4.0 x16 (64 GB/s)", interconnect_gb_s=64.0,
        price_per_hour_usd=1.006, price_date="2025-06",
        price_source="AWS EC2 on-demand, g5.xlarge (1x A10G), us-east-1",
        spec_source=("AWS-only part, no NVIDIA datasheet; ~70 TFLOPS FP16/BF16 dense tensor as commonly "
                     "cited for A10G, 600 GB/s as for A10"),
    ),
    GPU(
        key="l4", name="NVIDIA L4",
        memory_bytes=_mib(23034),
        memory_source="nvidia-smi: 23034 MiB (modal-labs/modal-client PR #2797 and several public logs)",
        bandwidth_gb_s=300.0, bf16_tflops=121.0, fp16_tflops=121.0, fp8_tflops=242.5,
        compute_capability="8.9", vendor="nvidia",
        interconnect="PCIe 4.0 x16 (64 GB/s)", interconnect_gb_s=64.0,
        price_per_hour_usd=0.71, price_date="2025-06",
        price_source="Google Cloud on-demand, g2-standard-4 (1x L4 with 4 vCPU), us-central1",
        spec_source="NVIDIA L4 Tensor Core GPU datasheet (242/485 TFLOPS BF16/FP8 with sparsity, halved)",
    ),
    GPU(
        key="l40s", name="NVIDIA L40S",
        memory_bytes=_mib(46068),
        memory_source="nvidia-smi: 46068 MiB (modal-labs/modal-client PR #2797 and several public logs)",
        bandwidth_gb_s=864.0, bf16_tflops=362.05, fp16_tflops=362.05, fp8_tflops=733.0,
        compute_capability="8.9", vendor="nvidia",
        interconnect="PCIe 4.0 x16 (64 GB/s)", interconnect_gb_s=64.0,
        price_per_hour_usd=0.86, price_date="2025-06",
        price_source="RunPod on-demand (Secure Cloud), L40S",
        spec_source="NVIDIA L40S datasheet (362.05 TFLOPS BF16 dense, 733 FP8 dense, 864 GB/s)",
        cuda_total_bytes=_logged_gib("44.68"),
        cuda_total_source=("PyTorch out-of-memory message: 'total capacity of 44.68 GiB' (AWS G6e L40S, vladmandic/sdnext issue #3656)"),
    ),
    GPU(
        key="rtx-3090", name="NVIDIA GeForce RTX 3090",
        memory_bytes=_mib(24576),
        memory_source="nvidia-smi: 24576 MiB (GeForce RTX 3090; noonghunna/club-3090 issue #1127 and many public logs)",
        bandwidth_gb_s=936.0, bf16_tflops=71.0, fp16_tflops=71.0, fp8_tflops=None,
        compute_capability="8.6", vendor="nvidia",
        interconnect="PCIe 4.0 x16 (64 GB/s); optional 2-way NVLink bridge 112.5 GB/s", interconnect_gb_s=64.0,
        price_per_hour_usd=0.43, price_date="2025-06",
        price_source="RunPod on-demand (Secure Cloud), RTX 3090",
        spec_source="NVIDIA Ampere GA102 whitepaper (RTX 3090: 71 TFLOPS FP16/BF16 tensor, FP32 accumulate, dense)",
    ),
    GPU(
        key="rtx-4090", name="NVIDIA GeForce RTX 4090",
        memory_bytes=_mib(24564),
        memory_source="nvidia-smi: 24564 MiB (GeForce RTX 4090; RLinf/RLinf issue #255 and many public logs)",
        bandwidth_gb_s=1008.0, bf16_tflops=165.2, fp16_tflops=165.2, fp8_tflops=330.3,
        compute_capability="8.9", vendor="nvidia",
        interconnect="PCIe 4.0 x16 (64 GB/s); no NVLink", interconnect_gb_s=64.0,
        price_per_hour_usd=0.69, price_date="2025-06",
        price_source="RunPod on-demand (Secure Cloud), RTX 4090",
        spec_source="NVIDIA Ada Lovelace architecture whitepaper (RTX 4090, FP32 accumulate, dense)",
        cuda_total_bytes=_logged_gib("23.64", "23.65", "23.68"),
        cuda_total_source=("PyTorch out-of-memory messages: 'total capacity of 23.64 GiB' (RTX 4090, ali-vilab/VGen issue #104), 23.65 GiB (tloen/llama-int8 issue #7), 23.68 GiB (zai-org/CogVideo issue #36)"),
    ),
    GPU(
        key="rtx-a5000", name="NVIDIA RTX A5000",
        memory_bytes=_mib(24564),
        memory_source="nvidia-smi: 24564 MiB (NVIDIA RTX A5000; public nvidia-smi log)",
        bandwidth_gb_s=768.0, bf16_tflops=111.1, fp16_tflops=111.1, fp8_tflops=None,
        compute_capability="8.6", vendor="nvidia",
        interconnect="PCIe 4.0 x16 (64 GB/s); optional 2-way NVLink bridge 112.5 GB/s", interconnect_gb_s=64.0,
        price_per_hour_usd=None, price_date="", price_source="",
        spec_source="NVIDIA RTX A5000 datasheet (222.2 TFLOPS tensor with sparsity, halved; 768 GB/s)",
    ),
    GPU(
        key="rtx-a6000", name="NVIDIA RTX A6000",
        memory_bytes=_mib(49140),
        memory_source="nvidia-smi: 49140 MiB (NVIDIA RTX A6000; several public nvidia-smi logs)",
        bandwidth_gb_s=768.0, bf16_tflops=154.8, fp16_tflops=154.8, fp8_tflops=None,
        compute_capability="8.6", vendor="nvidia",
        interconnect="PCIe 4.0 x16 (64 GB/s); optional 2-way NVLink bridge 112.5 GB/s", interconnect_gb_s=64.0,
        price_per_hour_usd=0.80, price_date="2025-06",
        price_source="Lambda Cloud on-demand, 1x RTX A6000 (48 GB)",
        spec_source="NVIDIA RTX A6000 datasheet (309.7 TFLOPS tensor with sparsity, halved; 768 GB/s)",
    ),
    GPU(
        key="a100-40gb", name="NVIDIA A100 40GB SXM",
        memory_bytes=_mib(40960),
        memory_source="nvidia-smi: 40960 MiB (A100-SXM4-40GB / A100-PCIE-40GB; modal-labs/modal-client PR #2797)",
        bandwidth_gb_s=1555.0, bf16_tflops=312.0, fp16_tflops=312.0, fp8_tflops=None,
        compute_capability="8.0", vendor="nvidia",
        interconnect="NVLink 3 (600 GB/s)", interconnect_gb_s=600.0,
        price_per_hour_usd=1.29, price_date="2025-06",
        price_source="Lambda Cloud on-demand, 1x A100 (40 GB SXM4)",
        spec_source="NVIDIA A100 Tensor Core GPU datasheet (312 TFLOPS BF16 dense, 1555 GB/s)",
        cuda_total_bytes=42_298_834_944,
        cuda_total_source=("deviceQuery 'Total amount of global memory: 40339 MBytes (42298834944 bytes)' for NVIDIA A100-SXM4-40GB (bottlerocket-os/bottlerocket PR #3873); PyTorch logs 39.50 and 39.59 GiB (TianheWu/CoSeR issue #10, raoyongming/DenseCLIP issue #52)"),
    ),
    GPU(
        key="a100-80gb", name="NVIDIA A100 80GB SXM",
        memory_bytes=_mib(81920),
        memory_source="nvidia-smi: 81920 MiB (A100-SXM4-80GB / A100 80GB PCIe; modal-labs/modal-client PR #2797)",
        bandwidth_gb_s=2039.0, bf16_tflops=312.0, fp16_tflops=312.0, fp8_tflops=None,
        compute_capability="8.0", vendor="nvidia",
        interconnect="NVLink 3 (600 GB/s)", interconnect_gb_s=600.0,
        price_per_hour_usd=1.79, price_date="2025-06",
        price_source="Lambda Cloud on-demand, 8x A100 (80 GB SXM4), per GPU",
        spec_source="NVIDIA A100 Tensor Core GPU datasheet (312 TFLOPS BF16 dense, 2039 GB/s SXM)",
        cuda_total_bytes=_logged_gib("79.14", "79.25"),
        cuda_total_source=("PyTorch out-of-memory messages: 'total capacity of 79.14 GiB' (A100 80GB, lianqi1008/Control-GIC issue #6), '79.25 GiB total capacity' (levihsu/OOTDiffusion issue #235)"),
    ),
    GPU(
        key="h100-pcie-80gb", name="NVIDIA H100 PCIe 80GB",
        memory_bytes=_mib(81559),
        memory_source="nvidia-smi: 81559 MiB (NVIDIA H100 PCIe; several public nvidia-smi logs)",
        bandwidth_gb_s=2000.0, bf16_tflops=756.5, fp16_tflops=756.5, fp8_tflops=1513.0,
        compute_capability="9.0", vendor="nvidia",
        interconnect="PCIe 5.0 x16 (128 GB/s); optional NVLink bridge 600 GB/s", interconnect_gb_s=128.0,
        price_per_hour_usd=2.49, price_date="2025-06",
        price_source="Lambda Cloud on-demand, 1x H100 (80 GB PCIe)",
        spec_source="NVIDIA H100 Tensor Core GPU datasheet (PCIe: 1513/3026 TFLOPS BF16/FP8 with sparsity, halved; 2 TB/s)",
    ),
    GPU(
        key="h100-sxm-80gb", name="NVIDIA H100 80GB SXM",
        memory_bytes=_mib(81559),
        memory_source=("nvidia-smi: 81559 MiB (NVIDIA H100 80GB HBM3; NVIDIA/nccl issue #1264, "
                       "modal-labs/modal-client PR #2797)"),
        bandwidth_gb_s=3350.0, bf16_tflops=989.5, fp16_tflops=989.5, fp8_tflops=1979.0,
        compute_capability="9.0", vendor="nvidia",
        interconnect="NVLink 4 (900 GB/s)", interconnect_gb_s=900.0,
        price_per_hour_usd=2.99, price_date="2025-06",
        price_source="Lambda Cloud on-demand, 8x H100 (80 GB SXM5), per GPU",
        spec_source="NVIDIA H100 Tensor Core GPU datasheet (SXM: 1979/3958 TFLOPS BF16/FP8 with sparsity, halved; 3.35 TB/s)",
        cuda_total_bytes=_logged_gib("79.11", "79.18", "79.22"),
        cuda_total_source=("PyTorch out-of-memory message 'total capacity of 79.11 GiB' (H100, vllm-project/vllm issue #27508); vLLM start-up logs 79.18 GiB (llm-d/llm-d-benchmark) and 79.22 GiB (vLLM PR #10511)"),
    ),
    GPU(
        key="h100-nvl", name="NVIDIA H100 NVL 94GB",
        memory_bytes=_mib(95830),
        memory_source="nvidia-smi: 95830 MiB (NVIDIA H100 NVL; several public nvidia-smi logs)",
        bandwidth_gb_s=3900.0, bf16_tflops=835.5, fp16_tflops=835.5, fp8_tflops=1670.5,
        compute_capability="9.0", vendor="nvidia",
        interconnect="NVLink bridge (600 GB/s), PCIe 5.0 x16", interconnect_gb_s=600.0,
        price_per_hour_usd=None, price_date="", price_source="",
        spec_source="NVIDIA H100 Tensor Core GPU datasheet (NVL: 1671/3341 TFLOPS BF16/FP8 with sparsity, halved; 3.9 TB/s)",
        cuda_total_bytes=_logged_gib("93.00"),
        cuda_total_source=("PyTorch out-of-memory message: 'total capacity of 93.00 GiB' (H100 NVL, ali-vilab/VACE issue #56)"),
    ),
    GPU(
        key="h200", name="NVIDIA H200 141GB SXM",
        memory_bytes=_mib(143771),
        memory_source="nvidia-smi: 143771 MiB (NVIDIA H200; several public nvidia-smi logs)",
        bandwidth_gb_s=4800.0, bf16_tflops=989.5, fp16_tflops=989.5, fp8_tflops=1979.0,
        compute_capability="9.0", vendor="nvidia",
        interconnect="NVLink 4 (900 GB/s)", interconnect_gb_s=900.0,
        price_per_hour_usd=3.59, price_date="2025-06",
        price_source="RunPod on-demand (Secure Cloud), H200 SXM",
        spec_source="NVIDIA H200 Tensor Core GPU datasheet (SXM: 1979/3958 TFLOPS BF16/FP8 with sparsity, halved; 4.8 TB/s)",
    ),
    GPU(
        key="b200", name="NVIDIA B200 SXM",
        memory_bytes=_mib(183359),
        memory_source="nvidia-smi: 183359 MiB (NVIDIA B200; NVIDIA/TensorRT-LLM issue #10278 and several public logs)",
        bandwidth_gb_s=8000.0, bf16_tflops=2250.0, fp16_tflops=2250.0, fp8_tflops=4500.0,
        compute_capability="10.0", vendor="nvidia",
        interconnect="NVLink 5 (1800 GB/s)", interconnect_gb_s=1800.0,
        price_per_hour_usd=4.99, price_date="2025-06",
        price_source="Lambda Cloud on-demand, 8x B200 (SXM6), per GPU",
        spec_source=("NVIDIA HGX B200 datasheet, per GPU (36/72 PFLOPS BF16/FP8 sparse for 8 GPUs, halved; "
                     "8 TB/s; pytorch/ao PR #4002 measures ~7.7 TB/s peak from the bus width)"),
    ),
    GPU(
        key="mi300x", name="AMD Instinct MI300X",
        memory_bytes=205822885888,
        memory_source=("rocm-smi --showmeminfo vram: 205822885888 B = 196288 MiB (AMD Instinct MI300X; "
                       "several public rocm-smi logs)"),
        bandwidth_gb_s=5300.0, bf16_tflops=1307.4, fp16_tflops=1307.4, fp8_tflops=2614.9,
        compute_capability="gfx942", vendor="amd",
        interconnect="AMD Infinity Fabric, 7 links x 128 GB/s (896 GB/s)", interconnect_gb_s=896.0,
        price_per_hour_usd=1.85, price_date="2025-06",
        price_source="Vultr Cloud GPU on-demand, AMD Instinct MI300X, per GPU",
        spec_source="AMD Instinct MI300X data sheet (1307.4 TFLOPS BF16 dense, 2614.9 FP8 dense, 5.3 TB/s)",
    ),
)

GPUS: dict[str, GPU] = {g.key: g for g in _CATALOGUE}

# Extra spellings (already normalised) -> catalogue key, including the names nvidia-smi prints for
# these parts. PCIe variants of the A100/V100 are deliberately not aliased to the SXM entries:
# their bandwidth and links differ.
_ALIASES: dict[str, str] = {
    "teslat4": "t4",
    "v100sxm216gb": "v100-16gb",
    "v100sxm232gb": "v100-32gb",
    "rtxa5000": "rtx-a5000", "a5000": "rtx-a5000",
    "rtxa6000": "rtx-a6000", "a6000": "rtx-a6000",
    "rtx3090": "rtx-3090", "3090": "rtx-3090",
    "rtx4090": "rtx-4090", "4090": "rtx-4090",
    "a100sxm440gb": "a100-40gb", "a10040g": "a100-40gb",
    "a100sxm480gb": "a100-80gb", "a10080g": "a100-80gb",
    "h100": "h100-sxm-80gb", "h100sxm": "h100-sxm-80gb", "h100sxm5": "h100-sxm-80gb",
    "h10080gb": "h100-sxm-80gb", "h10080gbhbm3": "h100-sxm-80gb",
    "h100pcie": "h100-pcie-80gb",
    "h100nvl94gb": "h100-nvl",
    "h200sxm": "h200", "h200141gb": "h200",
    "b200sxm": "b200",
    "instinctmi300x": "mi300x",
}

_LEADING_WORDS = ("nvidia", "amd", "geforce", "tesla")


def normalise_gpu_name(s: str) -> str:
    """Lower-case, drop spaces/hyphens/underscores and a leading 'nvidia'/'amd'/'geforce'/'tesla' word.

    ``normalise_gpu_name("NVIDIA GeForce RTX 4090") == "rtx4090"``.
    """
    joined = re.sub(r"[\s_\-]+", "", str(s).lower())
    stripped = True
    while stripped:  # "NVIDIA GeForce RTX 4090" -> "nvidiageforcertx4090" -> "rtx4090"
        stripped = False
        for word in _LEADING_WORDS:
            if joined.startswith(word) and len(joined) > len(word):
                joined, stripped = joined[len(word):], True
    return joined


_LOOKUP: dict[str, str] = {normalise_gpu_name(k): k for k in GPUS}
_LOOKUP.update({normalise_gpu_name(g.name): g.key for g in GPUS.values()})
_LOOKUP.update(_ALIASES)


def get_gpu(name: str | GPU) -> GPU:
    """Return the catalogue GPU for ``name`` (any spacing/case, aliases allowed); a GPU is returned unchanged.

    An ambiguous name such as ``"a100"`` raises UnknownNameError listing the candidates.
    """
    if isinstance(name, GPU):
        return name
    if not isinstance(name, str):
        raise InvalidValueError("gpu", name, "must be a GPU name (str) such as 'a100-80gb', or a GPU")
    norm = normalise_gpu_name(name)
    if not norm:
        raise InvalidValueError("gpu", name, "must be a non-empty GPU name such as 'a100-80gb'")
    key = _LOOKUP.get(norm)
    if key is not None:
        return GPUS[key]
    # A name that begins several catalogue keys ("a100", "v100", "rtx") is ambiguous: list those.
    if len(norm) >= 2:
        candidates = sorted({k for n, k in _LOOKUP.items() if n.startswith(norm)})
        if len(candidates) >= 2:
            raise UnknownNameError("gpu", name, candidates, normalise=normalise_gpu_name)
    raise UnknownNameError("gpu", name, GPUS.keys(), normalise=normalise_gpu_name)


def list_gpus() -> list[GPU]:
    """All catalogue GPUs, smallest memory first, then cheapest (unpriced last), then key."""
    cards = list(GPUS.values())
    return [cards[i] for i in gpu_order([Fields(g) for g in cards])]


@portable
def gpu_order(cards):
    """Indices of ``cards`` smallest memory first, then cheapest (unpriced last), then by key (a stable insertion
    sort: the order of the catalogue table, which the static book shows too)."""
    def before(a, b):
        if a["memory_bytes"] != b["memory_bytes"]:
            return a["memory_bytes"] < b["memory_bytes"]
        pa = infinity() if a["price_per_hour_usd"] is None else a["price_per_hour_usd"]
        pb = infinity() if b["price_per_hour_usd"] is None else b["price_per_hour_usd"]
        if pa != pb:
            return pa < pb
        return a["key"] < b["key"]

    return stable_order(cards, before)


def capacity_bytes(value, field: str = "memory", *, positive: bool = True) -> int:
    """Bytes of a GPU, a catalogue GPU name, an int of bytes or a size such as ``"24GiB"`` -- the one reading of
    "a card or an amount of memory" that every solver, Breakdown.fits and the bookshelf use. A text that starts
    with a digit is a size, anything else a GPU name (close matches on a miss). ``positive``: refuse 0 bytes."""
    if isinstance(value, bool):
        raise InvalidValueError(field, value, "give bytes (int), a size such as '24GiB' or a catalogue GPU name")
    if isinstance(value, GPU):
        return value.memory_bytes
    if isinstance(value, str) and not value.strip()[:1].isdigit():
        return get_gpu(value).memory_bytes
    cap = parse_memory(value, field=field)
    if positive and cap <= 0:
        raise InvalidValueError(field, value, "must be more than 0 bytes")
    return cap
