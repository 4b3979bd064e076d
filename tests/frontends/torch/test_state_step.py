"""Decode steps of Hugging Face models whose cache keeps recurrent states (state_step.py).

Small Mamba and Jamba models from configs (random weights, nothing downloaded). Mamba's cache is, per
layer, a convolution window (B, C, K) and an SSM state (B, C, N), C = expand x hidden; Jamba has one
Mamba layer and one attention layer (keys and values of kv_len positions) with a mixture of experts.
By hand (fp32): the program reads every state whole and writes it whole once (the window shifts by
one token, the SSM state is replaced). The oldest column of each window is read by transformers'
``cat`` though no output uses it: the bound charges it (1/K of the window reads; not a minimum).
Skipped without transformers (optional extra ``zoo``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from solar_io.dse.decode import step_traffic  # noqa: E402
from solar_io.frontends.common.errors import CaptureError  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.frontends.torch.phases import Step  # noqa: E402

V, D, LAYERS, N, K, EXPAND = 128, 32, 2, 8, 4, 2
C = EXPAND * D
B, L = 2, 12
FP32 = 4

MAMBA = f"""\
import torch
from transformers import MambaConfig, MambaForCausalLM

def Model():
    return MambaForCausalLM(MambaConfig(vocab_size={V}, hidden_size={D}, num_hidden_layers={LAYERS}, state_size={N},
                                        conv_kernel={K}, expand={EXPAND}))

def get_inputs():  # the whole sequence (without --phase)
    return [torch.randint(0, {V}, (1, 8))]
"""

JAMBA = f"""\
import torch
from transformers import JambaConfig, JambaForCausalLM

def Model():
    cfg = JambaConfig(vocab_size={V}, hidden_size={D}, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                      attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1,
                      mamba_d_state={N}, mamba_d_conv={K}, mamba_expand={EXPAND})
    cfg._attn_implementation = "sdpa"
    return JambaForCausalLM(cfg)

def get_inputs():
    return [torch.randint(0, {V}, (1, 8))]
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_mamba_decode_reads_and_updates_each_state_once(tmp_path: Path) -> None:
    g = capture_file(_write(tmp_path, "mamba.py", MAMBA), step=Step("decode", batch=B, kv_len=L))
    assert g.validation.status == "passed", g.validation.reason
    assert not [n for n in g.nodes if n.kind == "opaque"]
    inputs = {t.name: g.shape(t.name) for t in g.tensors if t.role == "input"}
    assert inputs == {"ids": (B, 1), **{f"conv_state_{i}": (B, C, K) for i in range(LAYERS)},
                      **{f"ssm_state_{i}": (B, C, N) for i in range(LAYERS)}}
    updated = {t.updates for t in g.tensors if t.role == "output" and t.updates}
    assert updated == {n for n in inputs if n != "ids"}  # every state written back in place
    step = dict(next(a for a in g.assumptions if a.kind == "step").values)
    assert set(step["cache_inputs"]) == updated and len(step["cache_outputs"]) == 2 * LAYERS
    # each state read whole and written whole: 2 x (B C K + B C N) x 4 B per layer
    assert step_traffic(g).cache_bytes == LAYERS * 2 * (B * C * K + B * C * N) * FP32


def test_the_step_continues_a_prefill_as_the_whole_sequence_does() -> None:
    """Independent of the capture: states from a real prefill of L tokens, then the step's one token,
    give the logits of the last position of one forward over all L + 1 tokens."""
    from transformers import DynamicCache, MambaConfig, MambaForCausalLM

    from solar_io.frontends.torch.state_step import HFStateStep, state_slots

    torch.manual_seed(0)
    lm = MambaForCausalLM(MambaConfig(vocab_size=V, hidden_size=D, num_hidden_layers=LAYERS, state_size=N,
                                      conv_kernel=K, expand=EXPAND)).eval()
    ids = torch.randint(0, V, (B, L + 1))
    cache = DynamicCache(config=lm.config)
    with torch.no_grad():
        whole = lm(input_ids=ids).logits[:, -1]
        lm(input_ids=ids[:, :L], cache=cache, use_cache=True)
        with torch.device("meta"):
            probe = MambaForCausalLM(lm.config)
        slots = state_slots(probe, B, L, "mamba.py")
        states = [s.of(cache).clone() for s in slots]
        logits = HFStateStep(lm, Step("decode", batch=B, kv_len=L), slots)(ids[:, L:], *states)[0][:, -1]
    assert torch.allclose(logits, whole, atol=1e-4), (logits - whole).abs().max()


def test_a_hybrid_with_experts_caches_keys_values_and_states(tmp_path: Path) -> None:
    """Jamba: the probe finds the Mamba layer's states through its mixture of experts (whose routing it
    makes up), and the attention layer's keys and values hold kv_len positions."""
    g = capture_file(_write(tmp_path, "jamba.py", JAMBA), step=Step("decode", batch=B, kv_len=L))
    assert g.validation.status == "passed", g.validation.reason
    assert not [n for n in g.nodes if n.kind == "opaque"]
    inputs = {t.name: g.shape(t.name) for t in g.tensors if t.role == "input"}
    assert inputs == {"ids": (B, 1), "conv_state_0": (B, C, K), "ssm_state_0": (B, C, N),
                      "k_cache_1": (B, 2, L, 8), "v_cache_1": (B, 2, L, 8)}
    with pytest.raises(CaptureError, match="recurrent states.*use --cache dynamic"):
        capture_file(_write(tmp_path, "jamba2.py", JAMBA), step=Step("decode", batch=B, kv_len=L, cache="static"))
