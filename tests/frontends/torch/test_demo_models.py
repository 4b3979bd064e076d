"""The ``make run`` demo's two networks are the published ones, and the published time can be bounded.

``examples/models/llama3_8b.py`` must be Meta-Llama-3-8B and ``examples/models/llama2_7b.py`` the
Llama 2 7B whose H100 first-token time (30.8 ms, TensorRT-LLM v0.9.0) ``make run`` compares with:
their parameter counts equal the published models' (8,030,261,248 and 6,738,415,616, the counts of
the Hugging Face checkpoints meta-llama/Meta-Llama-3-8B and meta-llama/Llama-2-7b-hf), built on the
meta device. A two-block twin of the Llama 2 7B prefill at full width and length is captured and
its MACs equal a hand count, and the fp8 compute floor of all 32 layers by that count is below
the published time (a lower bound the measurement could beat would make the demo's headroom void).
"""

import importlib.util

import pytest
from paths import ROOT

torch = pytest.importorskip("torch")


def _module(name):
    spec = importlib.util.spec_from_file_location(f"demo_{name}", ROOT / f"examples/models/{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _parameters(model_cls) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in model_cls().parameters())


def test_demo_networks_have_the_published_parameter_counts() -> None:
    assert _parameters(_module("llama3_8b").Model) == 8_030_261_248
    assert _parameters(_module("llama2_7b").Model) == 6_738_415_616


# Per token and layer, by hand: q, k, v, o (4096 x 4096 each: 32 heads, no grouped KV heads) and
# gate, up, down (4096 x 11008); causal attention: q.k and p.v over the 2048 * 2049 / 2 visible pairs
# of 32 heads of 128; the head projects the last position only (4096 x 32000).
D, FF, S, HEADS, HD, VOCAB = 4096, 11008, 2048, 32, 128, 32000
LINEAR_PER_TOKEN_LAYER = 4 * D * D + 3 * D * FF
ATTENTION_PER_LAYER = 2 * HEADS * HD * S * (S + 1) // 2


def test_two_block_twin_of_the_published_prefill_has_the_hand_counted_macs() -> None:
    from solar_io.backends.bound import bound
    from solar_io.frontends.select import capture

    path = ROOT / "examples/models/llama2_7b.py"
    g = capture(path, "torch", entry=f"{path}:TwoBlocks", dtype="bf16", validate=False)  # counts only
    report = bound(g, "h100-sxm", dtype="fp8_e4m3")
    (matrix,) = [r for r in report.resources if r.key == "matrix/fp8"]
    per_layer = S * LINEAR_PER_TOKEN_LAYER + ATTENTION_PER_LAYER
    # The head reads the last position only, so the second block computes q, o, the MLP and attention for
    # that one query (live_work); its k and v serve every position. Its attention row is counted at the
    # causal tensors' density (S + 1) / 2S (the bounds' product of densities and live fraction).
    last = S * 2 * D * D + (2 * D * D + 3 * D * FF) + 2 * HEADS * HD * S * (S + 1) // (2 * S)
    assert matrix.work_fused == 2 * (per_layer + last + D * VOCAB)
    # all 32 blocks at the fp8 peak: the fused compute time make run prints, below the published 30.8 ms
    floor_32_blocks = 2 * (32 * per_layer + D * VOCAB) / matrix.rate
    assert 13.9e-3 < floor_32_blocks < 30.8e-3, f"fp8 compute floor {floor_32_blocks * 1e3:.2f} ms"
