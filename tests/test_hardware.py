"""Tests for vramlib.catalog.hardware: memory as reported, name look-up, capability flags, validation."""
from __future__ import annotations

import dataclasses
import re

import pytest

from vramlib.core.errors import InvalidValueError, UnknownNameError, VramlibError
from vramlib.catalog.hardware import GPUS, get_gpu, list_gpus, normalise_gpu_name

MIB = 2**20

REQUIRED_KEYS = {
    "t4", "v100-16gb", "v100-32gb", "a10", "a10g", "l4", "l40s", "rtx-3090", "rtx-4090",
    "rtx-a6000", "a100-40gb", "a100-80gb", "h100-sxm-80gb", "h100-pcie-80gb", "h200", "b200", "mi300x",
}

# The exact totals recorded in the catalogue (nvidia-smi "Total" MiB; rocm-smi bytes for MI300X).
REPORTED_MIB = {
    "t4": 15360,
    "v100-16gb": 16384,
    "v100-32gb": 32768,
    "a10": 23028,
    "a10g": 23028,
    "l4": 23034,
    "l40s": 46068,
    "rtx-3090": 24576,
    "rtx-4090": 24564,
    "rtx-a5000": 24564,
    "rtx-a6000": 49140,
    "a100-40gb": 40960,
    "a100-80gb": 81920,
    "h100-sxm-80gb": 81559,
    "h100-pcie-80gb": 81559,
    "h100-nvl": 95830,
    "h200": 143771,
    "b200": 183359,
}

# (low, high) GiB band for each card's marketing size: reported memory sits at or a little under it.
GIB_BANDS = {
    "t4": (14.9, 16.1),
    "v100-16gb": (15.7, 16.1),
    "v100-32gb": (31.7, 32.1),
    "a10": (22.2, 24.1),
    "a10g": (22.2, 24.1),
    "l4": (22.2, 24.1),
    "rtx-3090": (23.9, 24.1),
    "rtx-4090": (23.9, 24.1),
    "l40s": (44.5, 48.1),
    "rtx-a6000": (47.5, 48.1),
    "a100-40gb": (39.9, 40.1),
    "a100-80gb": (79.9, 80.1),
    "h100-sxm-80gb": (79.0, 80.1),
    "h100-pcie-80gb": (79.0, 80.1),
    "h200": (140.0, 141.1),
    "b200": (178.0, 180.1),
    "mi300x": (191.0, 192.1),
}


def test_all_required_keys_present():
    assert REQUIRED_KEYS <= set(GPUS)
    for key, gpu in GPUS.items():
        assert gpu.key == key
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", key)


def test_exact_memory_bytes_as_reported():
    assert GPUS["a100-80gb"].memory_bytes == 81920 * 2**20 == 85_899_345_920
    assert GPUS["rtx-4090"].memory_bytes == 24564 * 2**20
    assert GPUS["h100-sxm-80gb"].memory_bytes == 81559 * 2**20
    for key, mib in REPORTED_MIB.items():
        assert GPUS[key].memory_bytes == mib * MIB, key
        assert GPUS[key].memory_mib == mib
        assert str(mib) in GPUS[key].memory_source, key


def test_mi300x_memory_from_rocm_smi_bytes():
    gpu = GPUS["mi300x"]
    assert gpu.memory_bytes == 205_822_885_888
    assert gpu.memory_mib == 196288
    assert "205822885888" in gpu.memory_source


@pytest.mark.parametrize("key", sorted(GIB_BANDS))
def test_memory_gib_in_expected_band(key):
    low, high = GIB_BANDS[key]
    assert low <= GPUS[key].memory_gib <= high


def test_memory_units():
    gpu = GPUS["a100-80gb"]
    assert gpu.memory_gib == pytest.approx(80.0)
    assert gpu.memory_gb == pytest.approx(85.899345920)
    # An "80 GB" H100 reports less than 80 GiB: that difference is the point of recording it.
    assert GPUS["h100-sxm-80gb"].memory_gib == pytest.approx(79.647, abs=1e-3)
    assert GPUS["h100-sxm-80gb"].memory_bytes < 80 * 2**30


def test_every_memory_figure_names_its_source():
    for gpu in GPUS.values():
        assert gpu.memory_source.startswith(("nvidia-smi:", "rocm-smi")), gpu.key
        assert gpu.spec_source.strip()


@pytest.mark.parametrize(
    ("spelling", "key"),
    [
        ("A100 80GB", "a100-80gb"),
        ("a100-80gb", "a100-80gb"),
        ("NVIDIA-A100-80GB", "a100-80gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("a100_40gb", "a100-40gb"),
        ("RTX 4090", "rtx-4090"),
        ("rtx4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("geforce rtx 3090", "rtx-3090"),
        ("H100-SXM-80GB", "h100-sxm-80gb"),
        ("h100 sxm", "h100-sxm-80gb"),
        ("h100", "h100-sxm-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm-80gb"),
        ("H100 PCIe", "h100-pcie-80gb"),
        ("Tesla T4", "t4"),
        ("T4", "t4"),
        ("Tesla V100-SXM2-16GB", "v100-16gb"),
        ("V100 32GB", "v100-32gb"),
        ("A10", "a10"),
        ("A10G", "a10g"),
        ("L4", "l4"),
        ("L40S", "l40s"),
        ("RTX A6000", "rtx-a6000"),
        ("NVIDIA H200", "h200"),
        ("b200", "b200"),
        ("AMD Instinct MI300X", "mi300x"),
        ("MI300X", "mi300x"),
    ],
)
def test_lookup_normalisation_variants(spelling, key):
    assert get_gpu(spelling) is GPUS[key]


def test_normalise_gpu_name():
    assert normalise_gpu_name("NVIDIA-A100-80GB") == "a10080gb"
    assert normalise_gpu_name("NVIDIA GeForce RTX 4090") == "rtx4090"
    assert normalise_gpu_name(" h100 SXM ") == "h100sxm"
    assert normalise_gpu_name("AMD Instinct MI300X") == "instinctmi300x"


def test_get_gpu_returns_gpu_instance_unchanged():
    gpu = GPUS["l4"]
    assert get_gpu(gpu) is gpu
    custom = dataclasses.replace(gpu, key="my-l4", price_per_hour_usd=0.5)
    assert get_gpu(custom) is custom


def test_unknown_name_is_one_line_with_close_matches():
    with pytest.raises(UnknownNameError) as info:
        get_gpu("rtx4900")
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("gpu: unknown name 'rtx4900'")
    assert "'rtx-4090'" in msg
    assert "rtx-4090" in info.value.close_matches
    assert isinstance(info.value, KeyError) and isinstance(info.value, VramlibError)


def test_unknown_name_without_close_match_lists_allowed():
    with pytest.raises(UnknownNameError) as info:
        get_gpu("tpu-v5e")
    msg = str(info.value)
    assert "\n" not in msg
    assert "names allowed" in msg or "allowed:" in msg


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a100", {"a100-40gb", "a100-80gb"}),
        ("A100", {"a100-40gb", "a100-80gb"}),
        ("v100", {"v100-16gb", "v100-32gb"}),
    ],
)
def test_ambiguous_names_raise_with_candidates(name, expected):
    with pytest.raises(UnknownNameError) as info:
        get_gpu(name)
    assert set(info.value.close_matches) == expected
    msg = str(info.value)
    assert "\n" not in msg
    for key in expected:
        assert repr(key) in msg


@pytest.mark.parametrize("bad", [None, 3, 8.0, ["a100-80gb"], b"a100-80gb"])
def test_non_string_name_is_invalid_value(bad):
    with pytest.raises(InvalidValueError) as info:
        get_gpu(bad)
    assert str(info.value).startswith("gpu: ")


def test_blank_name_is_invalid_value():
    with pytest.raises(InvalidValueError):
        get_gpu("   ")


@pytest.mark.parametrize("key", ["t4", "v100-16gb", "v100-32gb"])
def test_pre_ampere_has_no_bf16_and_no_flash_attention_2(key):
    gpu = GPUS[key]
    assert gpu.supports_bf16 is False
    assert gpu.supports_flash_attention_2 is False
    assert gpu.bf16_tflops is None
    assert gpu.fp8_tflops is None


@pytest.mark.parametrize(
    "key",
    ["a10", "a10g", "l4", "l40s", "rtx-3090", "rtx-4090", "rtx-a6000", "a100-40gb", "a100-80gb",
     "h100-sxm-80gb", "h100-pcie-80gb", "h200", "b200", "mi300x"],
)
def test_ampere_and_later_support_bf16_and_flash_attention_2(key):
    gpu = GPUS[key]
    assert gpu.supports_bf16 is True
    assert gpu.supports_flash_attention_2 is True
    assert gpu.bf16_tflops is not None and gpu.bf16_tflops > 0


def test_fp8_only_on_ada_hopper_blackwell_and_mi300x():
    has_fp8 = {k for k, g in GPUS.items() if g.fp8_tflops is not None}
    assert has_fp8 == {"l4", "l40s", "rtx-4090", "h100-sxm-80gb", "h100-pcie-80gb", "h100-nvl", "h200", "b200", "mi300x"}


def test_compute_capability_and_vendor():
    assert GPUS["a100-80gb"].compute_capability == "8.0"
    assert GPUS["h100-sxm-80gb"].compute_capability == "9.0"
    assert GPUS["b200"].compute_capability == "10.0"
    assert GPUS["t4"].compute_capability == "7.5"
    assert GPUS["mi300x"].compute_capability == "gfx942"
    assert GPUS["mi300x"].vendor == "amd"
    assert {g.vendor for k, g in GPUS.items() if k != "mi300x"} == {"nvidia"}


def test_spec_sanity():
    # Dense numbers, not the sparsity-doubled headline figures.
    assert GPUS["h100-sxm-80gb"].bf16_tflops == pytest.approx(989.5, rel=0.01)
    assert GPUS["a100-80gb"].bf16_tflops == 312.0
    assert GPUS["h100-sxm-80gb"].bandwidth_gb_s > GPUS["a100-80gb"].bandwidth_gb_s > GPUS["a100-40gb"].bandwidth_gb_s
    assert GPUS["h200"].bandwidth_gb_s > GPUS["h100-sxm-80gb"].bandwidth_gb_s
    for gpu in GPUS.values():
        assert gpu.interconnect_gb_s > 0 and gpu.interconnect.strip()
        if gpu.fp8_tflops is not None and gpu.bf16_tflops is not None:
            # FP8 is twice BF16 on every part; 2% slack because the L40S datasheet itself
            # gives 362.05 BF16 and 733 FP8 dense.
            assert gpu.fp8_tflops == pytest.approx(2 * gpu.bf16_tflops, rel=0.02), gpu.key


def test_prices_have_date_and_source():
    priced = [g for g in GPUS.values() if g.price_per_hour_usd is not None]
    assert {g.key for g in priced} >= REQUIRED_KEYS
    for gpu in priced:
        assert gpu.price_per_hour_usd > 0
        assert re.fullmatch(r"\d{4}-\d{2}", gpu.price_date), gpu.key
        assert gpu.price_source.strip(), gpu.key


def test_list_gpus_sorted_by_memory_then_price():
    gpus = list_gpus()
    assert len(gpus) == len(GPUS)
    assert {g.key for g in gpus} == set(GPUS)
    mem = [g.memory_bytes for g in gpus]
    assert mem == sorted(mem)
    assert gpus[0].key == "t4"
    assert gpus[-1].key == "mi300x"
    # Same memory (81559 MiB): the cheaper H100 PCIe comes before the SXM.
    keys = [g.key for g in gpus]
    assert keys.index("h100-pcie-80gb") < keys.index("h100-sxm-80gb")
    # Same memory (24564 MiB): the priced RTX 4090 comes before the unpriced RTX A5000.
    assert keys.index("rtx-4090") < keys.index("rtx-a5000")


def test_gpu_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        GPUS["t4"].memory_bytes = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_bytes", 0),
        ("memory_bytes", -1),
        ("memory_bytes", 80e9),
        ("memory_bytes", True),
        ("bandwidth_gb_s", 0),
        ("bandwidth_gb_s", float("nan")),
        ("fp16_tflops", -5.0),
        ("fp8_tflops", 0),
        ("interconnect_gb_s", 0),
        ("price_per_hour_usd", -1.0),
        ("key", "A100 80GB"),
        ("key", ""),
        ("name", ""),
        ("memory_source", " "),
        ("spec_source", ""),
        ("vendor", "intel"),
        ("compute_capability", "ampere"),
        ("price_date", "June 2025"),
        ("price_source", ""),
        ("bf16_tflops", None),
    ],
)
def test_post_init_validation_names_the_field(field, value):
    with pytest.raises(InvalidValueError) as info:
        dataclasses.replace(GPUS["a100-80gb"], **{field: value})
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert "\n" not in str(info.value)


def test_post_init_rejects_bf16_figure_on_pre_ampere():
    with pytest.raises(InvalidValueError) as info:
        dataclasses.replace(GPUS["t4"], bf16_tflops=65.0)
    assert info.value.field == "bf16_tflops"


def test_post_init_amd_needs_gfx_arch():
    with pytest.raises(InvalidValueError) as info:
        dataclasses.replace(GPUS["mi300x"], compute_capability="9.4")
    assert info.value.field == "compute_capability"


def test_unpriced_entry_is_valid():
    gpu = dataclasses.replace(GPUS["t4"], key="t4-owned", price_per_hour_usd=None, price_date="", price_source="")
    assert gpu.price_per_hour_usd is None
