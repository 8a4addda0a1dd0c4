"""Host memory, the GPU's host link and Apple's unified memory: what holds (and how fast it reads) the layers that do
not fit on the GPU (issue 14).

* **Host memory** (:data:`HOSTS`): desktop and server DRAM configurations, bandwidth by :data:`DRAM_GB_S` (transfers
  per second x a 64-bit channel x channels / 8: DDR4-3200 dual channel is 51.2 GB/s, DDR5-5600 dual 89.6 GB/s, twelve
  channels of DDR5-4800 460.8 GB/s -- the theoretical peak; a decode reaches a fraction of it).
* **The host link** (:data:`PCIE_GB_S`, :data:`GPU_PCIE`): PCIe per direction, x16 (GT/s x lanes x 128/130 / 8:
  PCIe 4.0 31.5 GB/s), over which ``device_map`` offload streams weights to the GPU every token.
* **Apple silicon** (:data:`MACS`): unified memory that the GPU shares with the system; Metal lets one process keep
  ``recommendedMaxWorkingSetSize`` resident (:data:`METAL_WORKING_SET`: two thirds of memory up to 36 GiB, three
  quarters above, as llama.cpp logs it on 32 GB and 96 GB machines), at the chip's unified-memory bandwidth.

Sources are named per entry (Apple's announcements, DRAM and PCIe rates; ``docs/runtime-rules.md`` sections 7-8).
Used in: chapter 17 (offload), the ``vramlib offload`` command and the offload calculator.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from ..core.errors import UnknownNameError
from ..core.portable import share

__all__ = ["DRAM_GB_S", "GPU_PCIE", "HOSTS", "HostMemory", "Mac", "MACS", "METAL_WORKING_SET", "PCIE_GB_S",
           "get_host", "get_mac", "host_link_gb_s", "mac_working_set"]

mt, ch, bus, gt, lanes, mem = sp.symbols("mt ch bus gt lanes mem", positive=True)

DRAM_GB_S = mt * bus * ch / 8 / 1000
"""Theoretical DRAM bandwidth in GB/s: ``mt`` mega-transfers per second x ``bus`` bits per channel x ``ch`` channels
/ 8 bits per byte / 1000."""

PCIE_GB_S = gt * lanes * sp.Rational(128, 130) / 8
"""PCIe bandwidth per direction in GB/s (3.0 and later: 128b/130b encoding): ``gt`` GT/s per lane x ``lanes``."""

METAL_WORKING_SET = sp.Piecewise((sp.Rational(2, 3) * mem, mem <= 36 * 2**30), (sp.Rational(3, 4) * mem, True))
"""Bytes a Metal process may keep resident (``recommendedMaxWorkingSetSize``) on a Mac of ``mem`` bytes: logged as
21845.34 MB on 32 GB machines (2/3) and 73728 MB on a 96 GB one (3/4) by llama.cpp (ggml-org/llama.cpp PR #2011,
issue #3213); the 36 GB threshold is a published rule of thumb, not an Apple document. ``sudo sysctl
iogpu.wired_limit_mb=...`` raises it until a reboot."""

PCIE_GT = {3: 8, 4: 16, 5: 32}
"""GT/s per lane by PCIe generation."""


@dataclass(frozen=True)
class HostMemory:
    """A host memory configuration: DRAM kind, transfer rate, channels; bandwidth by DRAM_GB_S."""

    key: str
    name: str
    mt_s: int
    channels: int
    source: str

    @property
    def bandwidth_gb_s(self) -> Fraction:
        """Theoretical bandwidth, GB/s (DRAM_GB_S)."""
        return Fraction(str(DRAM_GB_S.subs({mt: self.mt_s, bus: 64, ch: self.channels})))


_DRAM = "bandwidth = MT/s x 64 bit x channels / 8 (JEDEC rates; bottleneckcalculator.to, calculator-cloud.com)"
HOSTS: dict[str, HostMemory] = {h.key: h for h in (
    HostMemory("ddr4-3200-2ch", "desktop DDR4-3200, dual channel", 3200, 2, _DRAM),
    HostMemory("ddr5-4800-2ch", "desktop DDR5-4800, dual channel", 4800, 2, _DRAM),
    HostMemory("ddr5-5600-2ch", "desktop DDR5-5600, dual channel", 5600, 2, _DRAM),
    HostMemory("ddr5-6000-2ch", "desktop DDR5-6000, dual channel", 6000, 2, _DRAM),
    HostMemory("ddr5-4800-8ch", "server DDR5-4800, 8 channels (one Xeon Sapphire Rapids socket)", 4800, 8, _DRAM),
    HostMemory("ddr5-4800-12ch", "server DDR5-4800, 12 channels (one EPYC 9004 socket)", 4800, 12,
               "AMD: 12 DDR5 channels, 460.8 GB/s per socket (Tom's Hardware, 'AMD confirms 12 DDR5 memory channels "
               "on Genoa')"),
)}
"""Host memory configurations by key (theoretical bandwidth; a CPU's decode reaches part of it)."""

GPU_PCIE: dict[str, int] = {"t4": 3, "v100-16gb": 3, "v100-32gb": 3, "a10": 4, "a10g": 4, "l4": 4, "l40s": 4,
                            "rtx-3090": 4, "rtx-4090": 4, "rtx-a5000": 4, "rtx-a6000": 4, "a100-40gb": 4,
                            "a100-80gb": 4, "h100-pcie-80gb": 5, "h100-sxm-80gb": 5, "h100-nvl": 5, "h200": 5,
                            "b200": 5, "mi300x": 5}
"""The PCIe generation of each catalogue card's host link (x16; the vendors' datasheets)."""


def host_link_gb_s(gpu_key: str) -> Fraction:
    """The card's host-to-device bandwidth, GB/s per direction (PCIE_GB_S at its generation, x16)."""
    gen = GPU_PCIE.get(gpu_key)
    if gen is None:
        raise UnknownNameError("gpu", gpu_key, GPU_PCIE)
    return Fraction(str(PCIE_GB_S.subs({gt: PCIE_GT[gen], lanes: 16})))


@dataclass(frozen=True)
class Mac:
    """An Apple silicon chip at one unified-memory size: bandwidth as Apple announces it."""

    key: str
    name: str
    memory_bytes: int
    bandwidth_gb_s: int
    source: str

    @property
    def working_set_bytes(self) -> int:
        """What Metal lets one process keep resident by default (METAL_WORKING_SET)."""
        return mac_working_set(self.memory_bytes)


def mac_working_set(memory_bytes: int) -> int:
    """METAL_WORKING_SET at ``memory_bytes`` of unified memory, whole bytes (rounded down)."""
    return int(sp.floor(METAL_WORKING_SET.subs(mem, memory_bytes)))


_GB = 2**30   # Apple's "GB" of unified memory is binary (a 32 GB Mac reports 34,359,738,368 bytes)
_M1 = "Apple newsroom 2021-10-18 (M1 Pro: 200GB/s, up to 32GB; M1 Max: 400GB/s, up to 64GB)"
_M2 = "Apple newsroom 2023-01-17 (M2 Pro 200GB/s, up to 32GB; M2 Max 400GB/s, up to 96GB)"
_M2U = "Apple newsroom 2023-06 (M2 Ultra: up to 192GB, 800GB/s)"
_M3 = "Apple M3 Pro/Max specifications (M3 Pro 150GB/s up to 36GB; M3 Max 400GB/s up to 128GB)"
_M3U = "Apple newsroom 2025-03 (M3 Ultra: up to 512GB, 'over 800GB/s'; 819.2 GB/s per Ars Technica)"
_M4 = "Apple newsroom 2024-10-30 (M4 Pro: up to 64GB at 273GB/s; M4 Max: up to 128GB, 546GB/s)"
MACS: dict[str, Mac] = {m.key: m for m in (
    Mac("m1-pro-32gb", "Apple M1 Pro, 32 GB", 32 * _GB, 200, _M1),
    Mac("m1-max-64gb", "Apple M1 Max, 64 GB", 64 * _GB, 400, _M1),
    Mac("m2-max-96gb", "Apple M2 Max, 96 GB", 96 * _GB, 400, _M2),
    Mac("m2-ultra-192gb", "Apple M2 Ultra, 192 GB", 192 * _GB, 800, _M2U),
    Mac("m3-pro-36gb", "Apple M3 Pro, 36 GB", 36 * _GB, 150, _M3),
    Mac("m3-max-128gb", "Apple M3 Max, 128 GB", 128 * _GB, 400, _M3),
    Mac("m3-ultra-512gb", "Apple M3 Ultra, 512 GB", 512 * _GB, 819, _M3U),
    Mac("m4-pro-48gb", "Apple M4 Pro, 48 GB", 48 * _GB, 273, _M4),
    Mac("m4-pro-64gb", "Apple M4 Pro, 64 GB", 64 * _GB, 273, _M4),
    Mac("m4-max-64gb", "Apple M4 Max, 64 GB", 64 * _GB, 546, _M4),
    Mac("m4-max-128gb", "Apple M4 Max, 128 GB", 128 * _GB, 546, _M4),
)}
"""Apple silicon at common memory sizes (the top bandwidth of each chip: binned M3 Max parts have 300 GB/s)."""


def _lookup(field: str, name, table: dict, cls):
    """An entry of ``table`` by key (an entry of ``cls`` passes through; close matches on a miss)."""
    if isinstance(name, cls):
        return name
    key = str(name).strip().lower()
    if key not in table:
        raise UnknownNameError(field, name, table)
    return table[key]


def get_host(name: str | HostMemory) -> HostMemory:
    """A host memory configuration by key (close matches on a miss)."""
    return _lookup("host", name, HOSTS, HostMemory)


def get_mac(name: str | Mac) -> Mac:
    """An Apple silicon entry by key (close matches on a miss)."""
    return _lookup("mac", name, MACS, Mac)


share(DRAM_GB_S=DRAM_GB_S, PCIE_GB_S=PCIE_GB_S, METAL_WORKING_SET=METAL_WORKING_SET)
