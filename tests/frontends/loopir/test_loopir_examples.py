"""The loop-IR examples: they run, lift, validate, and count what a hand derivation says.

Examples are validated (numba) at small sizes; counts are checked at their declared
sizes, traced without execution: against the equivalent hand-written graphs in
examples/graphs (whose counts tests/core/test_examples.py derives by hand) and against
derivations written out below. SPEC.md's worked examples are the example files,
verbatim, with the counts stated there.
"""

from __future__ import annotations

import importlib.util
import math
import re
from functools import cache
from pathlib import Path

import pytest
from paths import ROOT

import solar_io
from solar_io import graph_metrics
from solar_io.frontends.loopir import SPEC_PATH, capture_file

EXAMPLES = ROOT / "examples" / "loopir"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.py"))
SMALL = {
    "conv2d": dict(N=2, C=3, H=10, W=10, K=4, P=5, Q=5),
    "maxpool": dict(N=2, C=3, H=10, W=10, P=5, Q=5),
    "mlp": dict(B=4, D=16, H=32, O=8),
    "attention": dict(B=2, S=8, T=8, D=32, F=32, H=2, E=16),
    "transformer": dict(L=2, S=16, T=16, D=32, F=32, Hm=64, H=2, E=16),
}


@cache
def lifted(name: str, sizes: tuple = ()) -> solar_io.Graph:
    return capture_file(EXAMPLES / f"{name}.py", validate=False, sizes=dict(sizes))


def counts(g: solar_io.Graph) -> tuple:
    m = graph_metrics(g)
    return m.macs, m.flops_matrix, m.flops_vector, m.transcendental, m.bytes, m.boundary_bytes


def test_every_family_has_an_example():
    assert set(NAMES) >= {"matmul", "conv2d", "softmax", "layernorm", "attention", "lstm", "embedding",
                          "sparse_matmul", "mlp"}


needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")


@needs_numba
@pytest.mark.parametrize("name", NAMES)
def test_example_validates_with_numba(name):
    g = capture_file(EXAMPLES / f"{name}.py", sizes=SMALL.get(name), jit=True)
    v = g.validation
    assert v.status == "passed", v.reason
    assert v.max_rel_error is not None and v.max_rel_error < 1e-4
    assert "numba" in (v.reference or "")
    assert not [i for i in solar_io.validate(g) if i.severity == "error"]
    assert solar_io.loads(solar_io.dumps(g)) == g


@pytest.mark.parametrize("name", ["softmax", "lstm", "embedding"])
def test_example_validates_without_jit(name):
    g = capture_file(EXAMPLES / f"{name}.py", jit=False)
    assert g.validation.status == "passed", g.validation.reason
    assert "pure Python" in g.validation.reference


@pytest.mark.parametrize("name", ["matmul", "mlp", "conv2d", "attention"])
def test_counts_equal_the_hand_written_graph(name):
    ref = solar_io.load(ROOT / "examples" / "graphs" / f"{name}.yaml")
    g = lifted(name, ref.ranks)  # the example at the graph's sizes (matmul's differ)
    assert counts(g) == counts(ref)
    assert sum(n.kind == "einsum" for n in g.nodes) == sum(n.kind == "einsum" for n in ref.nodes)


def test_mlp_graph_is_the_hand_written_one_up_to_names():
    ref, g = solar_io.load(ROOT / "examples" / "graphs" / "mlp.yaml"), lifted("mlp")
    assert g.ranks == ref.ranks
    assert [(n.kind, n.map, n.reduce, n.space) for n in g.nodes] == [
        (n.kind, n.map, n.reduce, n.space) for n in ref.nodes]


def test_conv_access_and_padding():
    conv = lifted("conv2d").nodes[0]
    assert [str(a) for a in conv.inputs] == ["x[N, C, 2*P + R - 1, 2*Q + S - 1]", "w[K, C, R, S]"]
    assert conv.pad == (("x", (("H", 1, 0), ("W", 1, 0))),) and conv.fill == 0.0
    assert conv.space == ("N", "K", "P", "Q", "C", "R", "S")


def test_maxpool_counts_by_hand():
    g = lifted("maxpool")
    (pool,) = g.nodes
    N, C, P, Q = 8, 64, 56, 56
    assert (pool.map, pool.reduce, pool.fill) == ("identity", "max", -math.inf)
    assert pool.pad == (("x", (("H", 1, 0), ("W", 1, 0))),)
    m = graph_metrics(g)
    assert m.flops_vector == N * C * P * Q * (9 - 1) and m.macs == 0
    assert m.bytes == 2 * (N * C * 112 * 112 + N * C * P * Q)


def test_softmax_counts_by_hand():
    B, N = 4, 1000
    m = graph_metrics(lifted("softmax"))
    # max: N-1 combines per row; sub: N; exp: N transcendentals; sum: N-1; div: N
    assert m.flops_vector == B * ((N - 1) + N + (N - 1) + N) and m.transcendental == B * N and m.macs == 0
    f32 = 4
    assert m.bytes == f32 * ((B * N + B) + (B * N + B + B * N) + 2 * B * N + (B * N + B) + (B * N + B + B * N))


def test_layernorm_counts_by_hand():
    B, D = 16, 256
    m = graph_metrics(lifted("layernorm"))
    # sum (D-1 per row), scale mean [B], centre (B*D), square+sum (B*D + B*(D-1)),
    # var scale and +eps over [B], 3-input product (2*B*D), shift (B*D); one rsqrt per row
    assert m.flops_vector == B * (D - 1) + B + B * D + B * D + B * (D - 1) + 2 * B + 2 * B * D + B * D
    assert m.transcendental == B and m.macs == 0


def test_lstm_counts_by_hand():
    T, B, I, J, G = 3, 8, 32, 64, 4
    m = graph_metrics(lifted("lstm"))
    assert m.macs == T * B * G * J * (I + J)
    # per step: gate sum (3 inputs), cell: 2 sigmoid (2 each), 2 mul, 1 add; hidden: sigmoid, mul
    assert m.flops_vector == T * (2 * B * G * J + B * J * (2 * 2 + 2 + 1) + B * J * (2 + 1))
    assert m.transcendental == T * B * J * 5  # 3 sigmoid + 2 tanh
    assert sum(n.op == "loopir.select" for n in lifted("lstm").nodes) == T


def test_embedding_counts_by_hand():
    B, S, D = 2, 16, 64
    g = lifted("embedding")
    gather = g.nodes[0]
    assert gather.kind == "data_movement" and [str(a) for a in gather.inputs] == ["table[@ids, D]", "ids[B, S]"]
    gm = solar_io.node_metrics(g, gather)
    assert gm.flops == 0 and gm.bytes_read == {"table": B * S * D * 2, "ids": B * S * 4}
    assert graph_metrics(g).flops_vector == 2 * B * S * D


def test_sparse_matmul_reads_half_the_weight():
    M, N, K = 64, 64, 128
    g = lifted("sparse_matmul")
    assert g.tensor_map["apply_mask.y"].density == 0.5
    mm = solar_io.node_metrics(g, g.nodes[1])
    assert mm.macs == M * N * K and mm.bytes_read["apply_mask.y"] == K * N * 2 * 0.5


# ---------------------------------------------------------------------------- SPEC.md

SECTION = re.compile(r"^### 9\.\d+ [^\n]*\(`(examples/loopir/\w+\.py)`\)\n(.*?)```python\n(.*?)```\n(.*?)(?=^### |\Z)",
                     re.S | re.M)


def spec_examples() -> list[tuple[str, str, str]]:
    return [(m.group(1), m.group(3), m.group(4)) for m in SECTION.finditer(SPEC_PATH.read_text())]


def test_spec_has_the_worked_examples():
    files = [f for f, _, _ in spec_examples()]
    assert 8 <= len(files) <= 10, files
    assert {Path(f).stem for f in files} >= {"matmul", "conv2d", "softmax", "layernorm", "attention", "lstm",
                                              "embedding", "sparse_matmul"}


@pytest.mark.parametrize("example", spec_examples(), ids=lambda e: Path(e[0]).stem)
def test_spec_example_runs_lifts_and_counts(example, tmp_path):
    file, code, text = example
    assert (ROOT / file).read_text() == code, f"SPEC.md's copy of {file} differs from the file"
    prog = tmp_path / Path(file).name
    prog.write_text(code)
    g = capture_file(prog, sizes=SMALL.get(prog.stem))
    assert g.validation.status == "passed", g.validation.reason
    full = capture_file(prog, validate=False)
    m = graph_metrics(full)
    stated = re.search(r"Counts: MACs ([\d ]+); vector FLOPs ([\d ]+); transcendental ([\d ]+); bytes ([\d ]+)\.",
                       text)
    assert stated, "each example states its counts"
    assert [int(x.replace(" ", "")) for x in stated.groups()] == [m.macs, m.flops_vector, m.transcendental, m.bytes]
    assert f"Lifts to {len(full.nodes)} node" in text


@needs_numba
def test_transformer_24_layers_validated_at_reduced_sizes():
    small = {k: v for k, v in SMALL["transformer"].items() if k != "L"}
    g = capture_file(EXAMPLES / "transformer.py", validate_sizes=small)
    assert g.validation.status == "passed", g.validation.reason
    assert dict(g.validation.reduced_ranks) == small
    S, D, F, Hm, H, E, T, L = 128, 512, 512, 2048, 8, 64, 128, 24
    per_layer = 4 * S * D * F + 2 * H * S * T * E + 2 * S * D * Hm
    assert graph_metrics(g).macs == L * per_layer
    assert len(g.nodes) == 47 * L
    views = [n for n in g.nodes if n.op == "loopir.select"]
    assert len(views) == 8 * L and all(n.view for n in views)  # stacked weights: no copies
