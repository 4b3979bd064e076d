"""The JAX corpus (tests/models_jax): every program captures, validates against jax.jit, and
its MACs equal a hand derivation; where XLA's cost analysis counts the same thing, our FLOPs
equal XLA's."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")


from paths import TESTS  # noqa: E402

from solar_io.format.files import dumps, loads  # noqa: E402
from solar_io.frontends.common.builder import family  # noqa: E402
from solar_io.frontends.jax.capture import capture_program, load_program  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

MODELS = TESTS / "models_jax"


def resnet50_macs(batch: int, size: int, classes: int) -> int:
    """ResNet-50 v1.5 MACs from its architecture table: 7x7/2 stem, 3x3/2 max pool, stages of
    (3, 4, 6, 3) bottlenecks 1x1 -> 3x3 (stride 2 in the first block of stages 2-4) -> 1x1 (x4),
    a projection shortcut in each stage's first block, global pool, dense head."""
    h = (size + 6 - 7) // 2 + 1
    macs = batch * h * h * 64 * 3 * 49
    h = (h + 2 - 3) // 2 + 1
    cin = 64
    for i, blocks in enumerate((3, 4, 6, 3)):
        w = 64 * 2 ** i
        for b in range(blocks):
            stride = 2 if i > 0 and b == 0 else 1
            h2 = (h + 2 - 3) // stride + 1
            macs += batch * (h * h * w * cin + h2 * h2 * w * w * 9 + h2 * h2 * 4 * w * w)
            if b == 0:
                macs += batch * h2 * h2 * 4 * w * cin
            cin, h = 4 * w, h2
    return macs + batch * cin * classes


def gpt2_macs(batch: int, seq: int, dim: int, layers: int, vocab: int) -> int:
    """Per layer: qkv (3 d^2), scores and probabilities @ v (2 s d per token over all heads),
    output projection (d^2), MLP (8 d^2); the tied LM head (d * vocab); lookups are gathers."""
    return batch * seq * (layers * (12 * dim * dim + 2 * seq * dim) + dim * vocab)


# hand-derived multiply-accumulates of every corpus program
MACS = {
    "mlp.py": 8 * 32 * 64 + 8 * 64 * 16,
    "convnet.py": 2 * 28 * 28 * 8 * 1 * 9 + 2 * 14 * 14 * 16 * 4 * 9 + 2 * 7 * 7 * 16 * 16 * 9 + 2 * 784 * 10,
    "transformer.py": 32 * 32 * 96 + 2 * (2 * 4 * 16 * 16 * 8) + 32 * 32 * 32 + 2 * 32 * 32 * 64,
    "rnn_scan.py": 4 * (2 * 8 * 16 + 2 * 16 * 16),
    "flax_cnn.py": 2 * 8 * 8 * 8 * 3 * 9 + 2 * 4 * 4 * 8 * 10,
    "embedding.py": 0,
    "nnx_mlp.py": 4 * 16 * 32 + 4 * 32 * 8,
    # stem 7x7/2 (32 -> 16), max pool (-> 8), bottleneck 1x1, 3x3/2 (-> 4), 1x1, shortcut 1x1/2, head
    "flax_resnet_block.py": 2 * 16 * 16 * 8 * 3 * 49 + 2 * 64 * 4 * 8 + 2 * 16 * 4 * 4 * 9 + 2 * 16 * 16 * 4
    + 2 * 16 * 16 * 8 + 2 * 16 * 10,
    "flax_attention.py": 3 * 20 * 32 * 32 + 2 * (2 * 4 * 10 * 10 * 8) + 20 * 32 * 32 + 2 * 20 * 32 * 128,
    # batched matmul B*M*N*K, two contracting dims B*J*M*K, matrix-vector B*M*K
    "dot_variants.py": 2 * 6 * 5 * 8 + 2 * 3 * 6 * 8 + 2 * 6 * 8,
    # 1-d dilated (out 12, 3 taps, 4 -> 6), 3-d stride 2 (out 3x4x4, 27 taps, 2 -> 5),
    # depthwise stride 2 SAME (out 5x5, 9 taps, 8 channels), 2 groups (out 7x7, 3x2 taps, 2 -> 3 each)
    "conv_variants.py": 2 * 12 * 6 * 4 * 3 + 5 * 3 * 4 * 4 * 2 * 27 + 2 * 5 * 5 * 8 * 9 + 2 * 6 * 7 * 7 * 2 * 6,
    # dense 10 -> 256; two 4x4 stride-2 transposed convs: each output point of a dim gets
    # 4 / 2 = 2 taps that are not holes, i.e. I * K (input points x taps) per dim
    "conv_transpose.py": 2 * 10 * 256 + 2 * 16 * 8 * (4 * 4) ** 2 + 2 * 8 * 3 * (8 * 4) ** 2,
    "reductions.py": 0,
    "pooling.py": 0,
    "cumsum.py": 0,
    "gather_index.py": 0,
    "dynamic_update.py": 0,
    "pad_concat.py": 0,
    "flax_batchnorm.py": 6 * 12 * 32 + 6 * 32 * 5,
    "while_fori.py": 3 * 2 * 8 * 8,
    "resnet50.py": resnet50_macs(1, 32, 1000),
    "gpt2.py": gpt2_macs(2, 16, 32, 2, 50),
}

# opaque nodes allowed, with why
JUSTIFIED_OPAQUE: dict[str, set[str]] = {}

# Programs whose FLOPs equal XLA's cost analysis exactly: XLA counts 2 per MAC of a dot, one per
# elementwise op and per window combine, as we do. Elsewhere it differs by design: it skips
# convolution taps that read padding (we count them, as FlopCounterMode does), counts a while or
# scan body once whatever the trip count, and counts index normalisation and reductions after
# its own rewrites.
XLA_EQUAL = ["mlp.py", "dot_variants.py", "pooling.py", "pad_concat.py", "flax_batchnorm.py"]


def test_corpus_is_complete() -> None:
    files = sorted(p.name for p in MODELS.glob("*.py"))
    assert len(files) >= 20
    assert files == sorted(MACS)


@pytest.mark.parametrize("name", sorted(MACS))
def test_model_captures(name: str) -> None:
    cap = capture_program(load_program(MODELS / name))
    g = cap.graph
    assert g.validation.status == "passed", g.validation.reason
    assert {p for _, p, _ in cap.lowerer.opaque} == JUSTIFIED_OPAQUE.get(name, set())
    assert g.producer.frontend == "jax" and g.producer.source == name and len(g.producer.source_sha256) == 64
    assert graph_metrics(g).macs == MACS[name]
    roles = {t.role for t in g.tensors}
    assert {"input", "output"} <= roles
    text = dumps(g)
    assert dumps(loads(text)) == text


@pytest.mark.parametrize("name", XLA_EQUAL)
def test_flops_equal_xla_cost_analysis(name: str) -> None:
    prog = load_program(MODELS / name)
    cost = jax.jit(prog.fn).lower(prog.make_params(), *prog.make_inputs()).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    if not cost or "flops" not in cost:
        pytest.skip("XLA reports no FLOPs on this backend")
    m = graph_metrics(capture_program(prog, validate=False).graph)
    assert m.flops_matrix == 2 * MACS[name]
    assert cost["flops"] == m.flops_matrix + m.flops_vector
    assert cost.get("transcendentals", 0.0) == m.transcendental


def test_image_inputs_named_channels_last() -> None:
    """NHWC inputs read N, H, W, C (the PyTorch frontend's image names, channels last); an NCHW
    input of a convolution is named by the convolution's dimension numbers."""
    g = capture_program(load_program(MODELS / "convnet.py"), validate=False).graph
    assert g.tensor_map["x"].ranks == ("N", "H", "W", "C")
    g = capture_program(load_program(MODELS / "conv_variants.py"), validate=False).graph
    fams = {t.name: "".join(family(r) for r in t.ranks) for t in g.tensors if t.role == "input"}
    assert fams == {"x0": "NWC", "x1": "NCTHW", "x2": "NHWC", "x3": "NCHW"}
