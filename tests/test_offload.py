"""Partial offload (vramlib.serve.offload, vramlib.catalog.hosts): the split conserves every byte, -ngl follows
llama.cpp's order, the largest -ngl is the largest that fits, and the decode roofline is its two terms."""
from fractions import Fraction

import pytest

import vramlib as vl
from vramlib.catalog.hosts import HOSTS, MACS, get_host, host_link_gb_s, mac_working_set
from vramlib.catalog.precision import get_precision, precision_view
from vramlib.memory.inference import layer_weights_of
from vramlib.serve.llamacpp import LlamaCppConfig, gpu_budget, llamacpp_buffers
from vramlib.serve.offload import llamacpp_split, offload_plan
from vramlib.core.portable import Fields


def _lw(model, weights):
    m = vl.get_model(model)
    return m, layer_weights_of(m.view(), precision_view(get_precision(weights)))


@pytest.mark.parametrize("model,weights", [("llama-3.1-70b", "q4_k_m"), ("llama-3.1-8b", "q5_k_m"),
                                           ("qwen3-30b-a3b", "q4_k_m"), ("llama-3.2-1b", "q8_0"),
                                           ("mistral-7b", "bf16"), ("llama-3.1-8b", "gptq-4bit-g128")])
def test_layer_weights_sum_to_the_model(model, weights):
    m, (outside, layers) = _lw(model, weights)
    dup = dict(outside)["lm_head"] if m.tied_embeddings else 0
    total = sum(b for _, b in outside) + sum(x[0] for x in layers) - dup
    assert abs(total - vl.weights_bytes(m, weights)) <= (0 if weights.startswith("q") else m.n_layers)
    assert all(0 <= x[1] <= x[0] and 0 < x[2] <= x[0] for x in layers)
    assert (sum(x[1] for x in layers) > 0) == m.is_moe


def test_q4_k_m_layers_carry_their_own_types():
    """Q4_K_M upgrades attn_v and ffn_down to Q6_K on llama.cpp's use_more_bits layers: layer 0 (first eighth) is
    bigger than layer 10 (i - 10 = 0 mod 3 is not an upgrade), layer 12 (mod 3 == 2) is upgraded again."""
    _, (_, layers) = _lw("llama-3.1-70b", "q4_k_m")
    assert layers[0][0] > layers[10][0] and layers[12][0] == layers[0][0] and layers[79][0] == layers[0][0]


def _split(model, weights, ngl, cpu_moe=False, **ctx):
    m, lw = _lw(model, weights)
    bufs = llamacpp_buffers(m.view(), Fields(LlamaCppConfig(**ctx)), True)
    return m, lw, bufs, llamacpp_split(m.view(), lw, bufs, ngl, cpu_moe)


@pytest.mark.parametrize("ngl", [0, 1, 2, 40, 80, 81, -1])
def test_split_conserves_weights_and_kv(ngl):
    m, lw, bufs, s = _split("llama-3.1-70b", "q4_k_m", ngl)
    gpu, host = dict(s["gpu"]), dict(s["host"])
    assert gpu["model buffer"] + host["model buffer"] == sum(b for _, b in lw[0]) + sum(x[0] for x in lw[1])
    assert gpu["kv cache"] + host["kv cache"] == bufs[0]
    # llama.cpp 0c1e57098: i_gpu_start = n_layer + 1 - ngl over 81 units, the output layer being the last one
    assert s["layers_on_gpu"] == (80 if ngl == -1 else max(ngl - 1, 0))
    assert s["output_on_gpu"] == (ngl != 0)
    # the output layer first, then the last blocks: with -ngl k the GPU holds blocks 81-k .. 79
    assert gpu["model buffer"] == sum(x[0] for x in lw[1][80 - s["layers_on_gpu"]:]) + (
        dict(lw[0])["lm_head"] + dict(lw[0])["norm"] if s["output_on_gpu"] else 0)


def test_most_layers_is_the_largest_that_fits():
    p = offload_plan("llama-3.1-70b", "rtx-4090", "q4_k_m", host_ram="64GB")
    assert p.fits_gpu and p.fits_host and 0 < p.n_gpu_layers < 80 and p.output_on_gpu
    # the GPU's compute buffer holds room for the largest host weight a prompt batch copies over (op offload)
    _, lw, bufs, s = _split("llama-3.1-70b", "q4_k_m", p.n_gpu_layers)
    assert s["copied"] == max(x[2] for x in lw[1][:80 - p.layers_on_gpu]) > 0
    assert dict(p.gpu)["compute buffer"] == bufs[1] + s["copied"]
    assert dict(p.host)["compute buffer"] == bufs[1]
    more = offload_plan("llama-3.1-70b", "rtx-4090", "q4_k_m", host_ram="64GB", n_gpu_layers=p.n_gpu_layers + 1)
    assert not more.fits_gpu and more.gpu.total > p.gpu.total
    assert p.gpu_budget == gpu_budget("rtx-4090")[0]
    assert p.host_budget == 64 * 10**9 - 4 * 2**30


def test_decode_roofline_is_its_two_terms():
    p = offload_plan("llama-3.1-70b", "rtx-4090", "q4_k_m", host_ram="64GB", context_tokens=4096)
    m, lw, bufs, s = _split("llama-3.1-70b", "q4_k_m", p.n_gpu_layers)
    kv_token = 2 * 2 * 8 * 128                    # K and V, f16, 8 KV heads x 128 per layer
    gpu_read = sum(x[0] for x in lw[1][80 - p.layers_on_gpu:]) + p.layers_on_gpu * 4096 * kv_token
    gpu_read += dict(lw[0])["lm_head"] + dict(lw[0])["norm"]      # the output layer is offloaded first
    host_read = sum(x[0] for x in lw[1][:80 - p.layers_on_gpu]) + (80 - p.layers_on_gpu) * 4096 * kv_token
    assert (p.read_gpu, p.read_host) == (gpu_read, host_read)
    expected = gpu_read / (1008 * 10**9) + host_read / (Fraction("89.6") * 10**9)
    assert p.seconds_per_token == pytest.approx(float(expected), rel=1e-12)
    assert p.tokens_per_s == pytest.approx(1 / float(expected), rel=1e-12)
    # more layers on the GPU never decode slower
    slower = offload_plan("llama-3.1-70b", "rtx-4090", "q4_k_m", host_ram="64GB", context_tokens=4096,
                          n_gpu_layers=10)
    assert slower.tokens_per_s < p.tokens_per_s


def test_cpu_moe_keeps_routed_experts_on_the_host_and_reads_k_of_e():
    m, lw, bufs, s = _split("qwen3-30b-a3b", "q4_k_m", -1, cpu_moe=True)
    routed = sum(x[1] for x in lw[1])
    assert dict(s["host"])["routed experts"] == routed
    assert s["read_host"] == Fraction(m.experts_per_token, m.n_experts) * routed
    p = offload_plan("qwen3-30b-a3b", "rtx-4090", "q4_k_m", cpu_moe=True, n_gpu_layers=-1)
    assert any("estimate" in n for n in p.notes)      # the MoE compute buffer is named as an estimate


def test_hosts_and_macs():
    assert get_host("ddr5-5600-2ch").bandwidth_gb_s == Fraction("89.6")
    assert HOSTS["ddr4-3200-2ch"].bandwidth_gb_s == Fraction("51.2")
    assert HOSTS["ddr5-4800-12ch"].bandwidth_gb_s == Fraction("460.8")
    assert host_link_gb_s("rtx-4090") == Fraction(16 * 16 * 128, 130 * 8)
    # llama.cpp's logged recommendedMaxWorkingSetSize: 21845.34 MB on 32 GB, 73728 MB on 96 GB
    assert round(mac_working_set(32 * 2**30) / 2**20, 2) == 21845.33
    assert mac_working_set(96 * 2**30) == 73728 * 2**20
    assert MACS["m4-max-128gb"].working_set_bytes == 96 * 2**30


@pytest.mark.parametrize("kw,field", [(dict(host="ddr5-5600"), "host"), (dict(cpu_moe=True), "cpu_moe"),
                                      (dict(host_reserved="80GB"), "host_reserved"),
                                      (dict(n_gpu_layers=-3), "n_gpu_layers"), (dict(runtime="vllm"), "runtime")])
def test_bad_input_is_one_line(kw, field):
    with pytest.raises(vl.VramlibError) as e:
        offload_plan("llama-3.1-8b", "rtx-4090", "q4_k_m", **kw)
    assert "\n" not in str(e.value) and str(e.value).startswith(field)


def test_transformers_device_map_auto_places_as_accelerate_and_streams_over_pcie():
    """accelerate on one GPU: 90% of the free memory less the largest layer, the modules in order until one does
    not fit; every offloaded weight crosses PCIe (x16 of the card's generation) on every token."""
    p = offload_plan("llama-3.1-70b", "rtx-4090", "awq-4bit-g128", runtime="transformers", host_ram="128GB")
    m, (outside, layers) = _lw("llama-3.1-70b", "awq-4bit-g128")
    room = int(gpu_budget("rtx-4090")[0] * Fraction(9, 10)) - max(x[0] for x in layers)
    used, on = dict(outside)["embed"], 0
    while on < 80 and used + layers[on][0] <= room:
        used += layers[on][0]
        on += 1
    assert p.layers_on_gpu == on and 0 < on < 80 and not p.output_on_gpu
    streamed = sum(x[0] for x in layers[on:]) + dict(outside)["lm_head"] + dict(outside)["norm"]
    assert p.read_host == streamed == dict(p.host)["offloaded weights"]
    assert p.host_gb_s == float(host_link_gb_s("rtx-4090")) and p.decode_terms()[1]["read from"].startswith("PCIe")
    # device_map reserves no room for the cache: at 8K tokens this split does not fit the card
    assert not p.fits_gpu and dict(p.gpu)["kv cache (DynamicCache)"] == vl.kv_cache_bytes(m, 8192, dtype="bf16")
    nf4 = offload_plan("llama-3.1-70b", "rtx-4090", "nf4", runtime="transformers", host_ram="128GB")
    assert nf4.layers_on_gpu < p.layers_on_gpu      # bitsandbytes' quantizer keeps 90% of the 90%
    # llama.cpp's CPU layers read host memory at DRAM speed; device_map's cross PCIe: the same model is slower here
    assert p.tokens_per_s < offload_plan("llama-3.1-70b", "rtx-4090", "q4_k_m", host_ram="128GB").tokens_per_s
    for kw in (dict(weights="q4_k_m"), dict(n_gpu_layers=10)):
        with pytest.raises(vl.VramlibError):
            offload_plan("llama-3.1-70b", "rtx-4090", **{"weights": "bf16", **kw}, runtime="transformers")


def test_device_max_ctx_is_the_largest_that_fits_and_the_fit_map_reads_it():
    from vramlib.serve.offload import device_fit_map, device_max_ctx

    n = device_max_ctx("llama-3.1-70b", "m4-max-64gb", "q4_k_m")
    assert n % 256 == 0 and n > 0
    fits = vl.device_plan("llama-3.1-70b", "m4-max-64gb", "q4_k_m", llamacpp=LlamaCppConfig(n_ctx=n))
    over = vl.device_plan("llama-3.1-70b", "m4-max-64gb", "q4_k_m", llamacpp=LlamaCppConfig(n_ctx=n + 256))
    assert fits.fits and not over.fits
    assert device_max_ctx("llama-3.1-70b", "m4-pro-48gb", "q4_k_m") == 0       # the weights exceed Metal's share
    rows = device_fit_map(["llama-3.1-70b", "llama-3.1-8b"], ["m4-max-64gb"], ["q4_k_m"])
    assert [r["max context"] for r in rows][0] == n
    assert rows[1]["usable context"] == vl.get_model("llama-3.1-8b").max_context < rows[1]["max context"]


def test_recommend_devices_lists_every_kind_fastest_first():
    from vramlib.serve.offload import recommend_devices

    rows = recommend_devices("llama-3.1-70b", "q4_k_m", host_ram="64GB")
    assert [r["tokens/s"] for r in rows] == sorted((r["tokens/s"] for r in rows), reverse=True)
    assert {r["kind"] for r in rows} == {"GPU", "GPU + host", "Mac", "CPU"}
    by = {r["device"]: r for r in rows}
    assert by["rtx-4090"]["tokens/s"] == offload_plan("llama-3.1-70b", "rtx-4090", "q4_k_m", host_ram="64GB").tokens_per_s
    assert by["m4-max-64gb"]["tokens/s"] == vl.device_plan("llama-3.1-70b", "m4-max-64gb", "q4_k_m").tokens_per_s
    assert "m4-pro-48gb" not in by          # Metal's working set is too small: left out
