import pytest
from hypothesis import given, settings, strategies as st

import vramlib as vl
from vramlib.memory import training as T
from vramlib.memory.activations import RECOMPUTE

SRC7 = vl.get_model("source-7b")


def states(bd):
    return sum(v for k, v in bd.items() if k not in ("activations",) and not k.startswith("reserve"))


@pytest.mark.parametrize("convention,per_param", [("source-12", 12), ("mixed-fp32-master", 16)])
def test_conventions_bytes_per_param(convention, per_param):
    bd = vl.training_memory(SRC7, method="full", convention=convention, precision="bf16", optimizer="adamw")
    assert states(bd) == per_param * 7 * 10**9


def test_deepspeed_convention_18_plus_gather_buffer():
    bd = vl.training_memory(SRC7, method="full", convention="deepspeed")
    # DeepSpeed's model_to_params: the largest single module, here the 32000 x 4096 embedding
    assert bd["ZeRO-3 gather buffer"] == 4 * 32000 * 4096
    assert states(bd) - bd["ZeRO-3 gather buffer"] == 18 * 7 * 10**9


def test_source_q15_numbers():
    bd = vl.training_memory(SRC7, method="full", convention="source-12")
    assert bd["weights"] == 14 * 10**9 and bd["gradients"] == 14 * 10**9 and bd["optimizer states"] == 56 * 10**9
    assert states(bd) == 84 * 10**9 > vl.parse_memory("80GB")
    assert "master weights (fp32)" not in bd
    assert vl.training_memory(SRC7, convention="mixed-fp32-master")["master weights (fp32)"] == 28 * 10**9


def test_lora_params_exact():
    # LLaMA-1 33B, r = 16, all linear: per layer 16 x (4 x (6656 + 6656) + 2 x (6656 + 17920) + (17920 + 6656))
    assert vl.lora_params("llama-33b", 16, "all-linear") == 60 * 16 * (4 * 13312 + 3 * 24576) == 121_896_960
    assert vl.lora_params("llama-2-7b", 8, "qv") == 32 * 8 * 2 * (4096 + 4096)
    # fused modules (Phi-3): qkv_proj and gate_up_proj are single linears
    phi = vl.get_model("phi-3-mini")
    assert vl.lora_params(phi, 16, "attention") == 32 * 16 * ((3072 + 3 * 3072) + (3072 + 3072))
    with pytest.raises(vl.InvalidValueError, match="qkv_proj"):
        vl.lora_params(phi, 16, "qv")
    with pytest.raises(vl.UnknownNameError, match="lora_targets"):
        vl.lora_params("llama-2-7b", 16, ["q_prj"])


def test_qlora_breakdown():
    bd = vl.training_memory("llama-33b", method="qlora", seq=512, lora_rank=16)
    assert bd["base weights (nf4-dq)"] == vl.weights_detail("llama-33b", "nf4-dq")["weights"]
    assert bd["quantization constants"] > 0 and bd["unquantized tensors"] > 0
    assert bd["LoRA adapters"] == 4 * 121_896_960 == bd["gradients"]      # peft's fp32 adapters (lora_dtype)
    assert bd["optimizer states"] == 8 * 121_896_960 and "master weights (fp32)" not in bd
    half = vl.training_memory("llama-33b", method="qlora", seq=512, lora_rank=16, lora_dtype="bf16")
    assert half["LoRA adapters"] == 2 * 121_896_960 and half["master weights (fp32)"] == 4 * 121_896_960
    assert half.total == bd.total         # 2 + 2 + 4 + 8 = 4 + 4 + 8 bytes per adapter parameter with AdamW


def _small_tensors(name: str) -> int:
    """Elements of the 1-D tensors (norms, biases) under bitsandbytes' min_8bit_size, counted tensor by tensor."""
    from vramlib.memory.allocator import weight_tensors

    two_d = {"embed_tokens", "lm_head", "q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "gate_proj", "up_proj",
             "down_proj", "gate_up_proj"}
    sizes = [b // 2 for n, b in weight_tensors(name, "bf16") if n.rsplit(".", 1)[-1] not in two_d]
    return sum(x for x in sizes if x < T.BNB_MIN_8BIT_SIZE)


@pytest.mark.parametrize("name", ["llama-2-7b", "qwen2.5-0.5b", "qwen2.5-7b", "gpt2", "falcon-7b", "phi-3-mini"])
def test_8bit_adam_keeps_small_tensors_32bit(name):
    """bitsandbytes gives tensors under 4096 elements 32-bit states: Llama-2-7B's 4096-wide norms are 8-bit,
    Qwen2.5's narrow biases are not -- the expression agrees with the model's tensors one by one."""
    m = vl.get_model(name)
    g = m.param_groups()
    small = T.small_state_params(m.view(), g, T.Fields(T.OPTIMIZERS["adamw-8bit"]))
    assert small == _small_tensors(name) <= g["norm"] + g["bias"]
    full8 = vl.optimizer_state_bytes(m, "adamw-8bit")
    assert full8 == pytest.approx(2.03125 * (m.n_params - small) + 8 * small, abs=1)
    assert (small == 0) == (name in ("llama-2-7b", "falcon-7b"))    # 4096- and 4544-wide norms


def test_8bit_adam_keeps_narrow_lora_matrices_32bit():
    """Low-rank adapters on Qwen2.5-0.5B (896 wide, 128-wide k and v) have A and B matrices under 4096 elements."""
    m = vl.get_model("qwen2.5-0.5b")
    for rank, narrow in ((4, True), (16, True), (64, False)):     # k_proj's B at rank 16: 128 x 16
        n = vl.lora_params(m, rank)
        got = vl.optimizer_state_bytes(m, "adamw-8bit", lora_rank=rank)
        assert (got > 2.03125 * n + 1) == narrow
    assert vl.optimizer_state_bytes(m, "adamw", lora_rank=4) == 8 * vl.lora_params(m, 4)


def test_optimizer_states_order():
    m = vl.get_model("llama-2-7b")
    assert vl.optimizer_state_bytes(m, "sgd") < vl.optimizer_state_bytes(m, "adamw")
    assert vl.optimizer_state_bytes(m, "adafactor") < vl.optimizer_state_bytes(m, "adamw-8bit")


def test_bad_training_inputs():
    with pytest.raises(vl.UnknownNameError, match="method"):
        vl.training_memory(SRC7, method="ful")
    with pytest.raises(vl.UnknownNameError, match="convention"):
        vl.training_memory(SRC7, convention="deepspeeed")
    with pytest.raises(vl.InvalidValueError, match="precision"):
        vl.training_memory(SRC7, precision="int4")
    with pytest.raises(vl.UnknownNameError, match="optimizer"):
        vl.training_memory(SRC7, optimizer="adam-9bit")


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(["llama-2-7b", "mistral-7b", "qwen2.5-7b", "source-13b"]),
       seq=st.integers(1, 8192), batch=st.integers(1, 8), method=st.sampled_from(["full", "lora", "qlora"]),
       attention=st.sampled_from(["eager", "sdpa"]))
def test_more_recompute_never_raises_training_memory(model, seq, batch, method, attention):
    totals = [vl.training_memory(model, method=method, seq=seq, micro_batch=batch, recompute=r, attention=attention).total
              for r in ("none", "selective", "full")]
    assert totals[0] >= totals[1] >= totals[2]
    assert list(RECOMPUTE) == ["none", "selective", "full"]


# --- the Workload settings object (issue 11): one definition of a training step's settings ----------------------
def test_workload_and_keywords_give_the_same_step():
    w = vl.Workload(method="lora", seq=1024, precision="bf16", optimizer="adamw-8bit", lora_rank=8)
    by_kw = vl.training_memory("llama-2-7b", method="lora", seq=1024, optimizer="adamw-8bit", lora_rank=8,
                               micro_batch=2, recompute="full")
    by_w = vl.training_memory("llama-2-7b", workload=w, micro_batch=2, recompute="full")
    assert (dict(by_w), by_w.title, by_w.notes) == (dict(by_kw), by_kw.title, by_kw.notes)
    # keywords given with a workload override its fields; the workload itself is unchanged (frozen)
    longer = vl.training_memory("llama-2-7b", workload=w, seq=2048)
    assert longer.total == vl.training_memory("llama-2-7b", **{**_fields(w), "seq": 2048}).total
    assert w.seq == 1024 and w.with_(seq=2048) == vl.Workload(**{**_fields(w), "seq": 2048})


def _fields(w):
    from dataclasses import fields

    return {f.name: getattr(w, f.name) for f in fields(w)}


def test_training_memory_positional_arguments_keep_their_order():
    import inspect

    assert list(inspect.signature(vl.training_memory).parameters) == [
        "model", "method", "seq", "micro_batch", "precision", "optimizer", "convention", "recompute", "attention",
        "lora_rank", "lora_targets", "base_weights", "activation_style", "reserve", "workload", "optimizer_impl",
        "lora_dtype", "peak"]
    pos = vl.training_memory(SRC7, "qlora", 512, 2, "bf16", "adamw", "source-12", "full", "eager", 8)
    kw = vl.training_memory(SRC7, method="qlora", seq=512, micro_batch=2, convention="source-12", recompute="full",
                            attention="eager", lora_rank=8)
    assert dict(pos) == dict(kw)


def test_workload_refuses_bad_fields_in_one_line():
    for kw, field in [(dict(seqq=2), "seq"), (dict(method="lorra"), "method"), (dict(seq=0), "seq"),
                      (dict(precision="int4"), "precision"), (dict(optimizer="adam"), "optimizer"),
                      (dict(lora_targets=[]), "lora_targets"), (dict(lora_targets=[3]), "lora_targets"),
                      (dict(base_weights="nf5"), "base_weights"), (dict(reserve=-1), "reserve"),
                      (dict(activation_style="megatrn"), "activation_style"), (dict(lora_rank=1.5), "lora_rank")]:
        with pytest.raises(vl.VramlibError, match=field) as e:
            vl.Workload(**kw)
        assert "\n" not in str(e.value)
    with pytest.raises(vl.VramlibError, match="seq"):
        vl.Workload().with_(seqq=1)
    with pytest.raises(vl.InvalidValueError, match="workload"):
        vl.training_memory(SRC7, workload={"method": "lora"})


def test_workload_auto_style_is_plan_memorys_rule_on_one_gpu():
    # "auto": hf where the family is modelled, else megatron -- what plan_memory does at tp = pp = 1
    assert vl.training_memory("llama-2-7b", activation_style="auto").total == vl.training_memory("llama-2-7b").total
    assert vl.training_memory("gpt2", activation_style="auto").total == \
        vl.training_memory("gpt2", activation_style="megatron").total
    w = vl.Workload(seq=1024, activation_style="auto")
    assert vl.plan_memory("llama-2-7b", workload=w, buckets="none").total == \
        vl.training_memory("llama-2-7b", workload=w).total
