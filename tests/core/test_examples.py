"""Every example graph: format checks, execution, and counts derived by hand.

Examples execute at their real size when that is cheap; larger ones execute with their
ranks shrunk (same structure) against a numpy reference. For each example the MACs,
matrix and vector FLOPs, transcendental count and bytes are written out by hand below
and compared with ``solar_io.graph_metrics``; a new example needs its own entry.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from paths import ROOT
from test_executor import conv_reference, np_softmax

import solar_io
from solar_io import execute, graph_metrics, load

EXAMPLES = sorted((ROOT / "examples" / "graphs").glob("*.yaml"))
SOLAR_IO = str(Path(sys.executable).parent / "solar-io")
BF16 = 2  # bytes per element
CHEAP_MACS = 1e10
CHEAP_ELEMENTS = 3e7


def resized(g: solar_io.Graph, **sizes: int) -> solar_io.Graph:
    """``g`` with some rank sizes replaced; still a valid graph."""
    small = dataclasses.replace(g, ranks=tuple((r, sizes.get(r, n)) for r, n in g.ranks))
    assert not [i for i in solar_io.validate(small) if i.severity == "error"]
    return small


def random_inputs(g: solar_io.Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for t in g.tensors:
        if t.role in ("input", "weight") or (t.role == "constant" and t.value is None):
            shape = g.shape(t.name)
            out[t.name] = (np.zeros(shape, dtype=np.int64) if solar_io.dtypes.dtype(t.dtype).family != "float"
                           else rng.standard_normal(shape).astype(np.float32) / math.sqrt(max(shape or (1,))))
    return out


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def test_examples_exist():
    assert {p.stem for p in EXAMPLES} >= {"matmul", "mlp", "conv2d", "attention"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_checks_and_is_canonical(path: Path):
    for args in (["check", str(path)], ["fmt", "--check", str(path)]):
        r = subprocess.run([SOLAR_IO, *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    g = load(path)
    assert solar_io.dumps(g) == path.read_text()
    assert g.producer.frontend == "hand-written" and g.validation.status == "skipped" and g.validation.reason


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_executes(path: Path):
    g = load(path)
    m = graph_metrics(g)
    elements = sum(math.prod(g.shape(t.name)) for t in g.tensors)
    if m.opaque:
        pytest.skip(f"opaque nodes {m.opaque} need implementations")
    if m.macs > CHEAP_MACS or elements > CHEAP_ELEMENTS:
        g = resized(g, **SMALL.get(path.stem, {}))
        if graph_metrics(g).macs > CHEAP_MACS:
            pytest.skip("too large to execute here; counts are checked in test_example_counts")
    out = execute(g, random_inputs(g))
    assert set(out) == {t.name for t in g.tensors if t.role == "output"}
    for name, arr in out.items():
        assert arr.shape == g.shape(name) and np.isfinite(arr).all()


# ----------------------------------------------------------------------------- numeric references

#: Shrunk sizes of examples too large to execute in a test (same structure, same meaning).
SMALL = {"attention": {"B": 2, "S": 8, "T": 8, "D": 32, "F": 32, "H": 4, "E": 8}}


def test_matmul_example_matches_numpy():
    g = load(ROOT / "examples/graphs/matmul.yaml")
    v = random_inputs(g)
    np.testing.assert_allclose(execute(g, v)["C"], v["A"] @ v["B"], rtol=1e-3, atol=1e-3)


def test_mlp_example_matches_numpy():
    g = resized(load(ROOT / "examples/graphs/mlp.yaml"), B=8, D=16, H=32, O=8)
    v = random_inputs(g)
    ref = gelu(v["x"] @ v["w1"] + v["b1"]) @ v["w2"] + v["b2"]
    np.testing.assert_allclose(execute(g, v)["y"], ref, rtol=1e-4, atol=1e-5)


def test_conv2d_example_matches_numpy():
    g = load(ROOT / "examples/graphs/conv2d.yaml")  # real size: 0.46 GMAC
    v = random_inputs(g)
    ref = conv_reference(v["x"], v["w"], stride=2, pad=1, dil=1) + v["b"][None, :, None, None]
    np.testing.assert_allclose(execute(g, v)["y"], ref, rtol=1e-4, atol=1e-4)


def test_attention_example_matches_numpy():
    g = resized(load(ROOT / "examples/graphs/attention.yaml"), **SMALL["attention"])
    v = random_inputs(g)
    b, s, h, e = 2, 8, 4, 8
    q, k, vv = ((v["x"] @ v[w]).reshape(b, s, h, e) for w in ("wq", "wk", "wv"))
    p = np_softmax(np.einsum("bshe,bthe->bhst", q, k) * 0.125)
    ctx = np.einsum("bhst,bthe->bshe", p, vv).reshape(b, s, h * e)
    np.testing.assert_allclose(execute(g, v)["y"], ctx @ v["wo"], rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- counts by hand

def matmul_counts(r: dict[str, int]) -> dict[str, float]:
    M, N, K = r["M"], r["N"], r["K"]
    macs = M * N * K
    bytes_ = BF16 * (M * K + K * N + M * N)
    return {"macs": macs, "flops_matrix": 2 * macs, "flops_vector": 0, "transcendental": 0, "bytes": bytes_,
            "boundary_bytes": bytes_}


def mlp_counts(r: dict[str, int]) -> dict[str, float]:
    B, D, H, O = r["B"], r["D"], r["H"], r["O"]
    macs = B * D * H + B * H * O
    vector = B * H + 4 * B * H + B * O  # bias add (1/elem), exact GELU (4/elem), bias add
    bytes_ = BF16 * ((B * D + D * H + B * H)      # fc1: x, w1 -> h
                     + (B * H + H + B * H)        # fc1_bias: h, b1 -> hb
                     + (B * H + B * H)            # act: hb -> a
                     + (B * H + H * O + B * O)    # fc2: a, w2 -> z
                     + (B * O + O + B * O))       # fc2_bias: z, b2 -> y
    boundary = BF16 * (B * D + D * H + H + H * O + O + B * O)
    return {"macs": macs, "flops_matrix": 2 * macs, "flops_vector": vector, "transcendental": B * H,
            "bytes": bytes_, "boundary_bytes": boundary}


def conv2d_counts(r: dict[str, int]) -> dict[str, float]:
    N, C, H, W, K, R, S, P, Q = (r[k] for k in "NCHWKRSPQ")
    assert P == (H + 2 * 1 - (R - 1) - 1) // 2 + 1 and Q == (W + 2 - (S - 1) - 1) // 2 + 1
    macs = N * K * P * Q * C * R * S
    # Stride 2 with a 3-wide window covers every input row and column: x is read whole.
    bytes_ = BF16 * ((N * C * H * W + K * C * R * S + N * K * P * Q)   # conv: x, w -> acc
                     + (N * K * P * Q + K + N * K * P * Q))            # bias: acc, b -> y
    boundary = BF16 * (N * C * H * W + K * C * R * S + K + N * K * P * Q)
    return {"macs": macs, "flops_matrix": 2 * macs, "flops_vector": N * K * P * Q, "transcendental": 0,
            "bytes": bytes_, "boundary_bytes": boundary}


def attention_counts(r: dict[str, int]) -> dict[str, float]:
    B, S, T, D, F, H, E = (r[k] for k in "BSTDFHE")
    assert F == H * E and S == T
    scores = B * H * S * T
    macs = (B * S * F * D + 2 * B * T * F * D     # q, k, v projections
            + B * H * S * T * E                   # q k^T
            + B * S * H * E * T                   # probs v
            + B * S * D * F)                      # output projection
    vector = (scores                              # scale (mul by an immediate)
              + B * H * S * (T - 1)               # row max: one combine per reduced element
              + scores                            # subtract the max
              + B * H * S * (T - 1)               # row sum
              + scores)                           # divide by the sum
    bytes_ = BF16 * (
        (B * S * D + D * F + B * S * F)           # q_proj: x, wq -> q
        + 2 * (B * S * D + D * F + B * T * F)     # k_proj, v_proj (x read whole via T)
        + (B * S * H * E + B * T * H * E + scores)  # qk: qh, kh -> scores (head splits are views: 0)
        + (scores + scores)                       # scale: scores -> scaled (scale is an immediate: 0)
        + (scores + B * H * S)                    # row max
        + (scores + B * H * S + scores)           # subtract
        + (scores + scores)                       # exp
        + (scores + B * H * S)                    # row sum
        + (scores + B * H * S + scores)           # divide
        + (scores + B * T * H * E + B * S * H * E)  # probs v
        + (B * S * F + F * D + B * S * D))        # out_proj (merge_heads is a view: 0)
    boundary = BF16 * (B * S * D + 3 * D * F + F * D + B * S * D)
    return {"macs": macs, "flops_matrix": 2 * macs, "flops_vector": vector, "transcendental": scores,
            "bytes": bytes_, "boundary_bytes": boundary}


def mla_decode_naive_counts(r: dict[str, int]) -> dict[str, float]:
    B, S, T, H, E, R, C, Q, D = (r[k] for k in "BSTHERCQD")
    scores = B * H * S * T
    macs = (B * S * H * E * Q + B * S * H * R * Q   # q_up, q_rope_up
            + 2 * B * T * H * E * C               # k_up, v_up: per-token up-projections of the latent
            + B * H * S * T * E + B * H * S * T * R  # qk_nope, qk_pe
            + B * S * H * E * T + B * S * D * H * E)  # pv, out_proj
    vector = 4 * scores + 2 * B * H * S * (T - 1)  # add, scale, sub, div; row max and row sum combines
    bytes_ = BF16 * (
        (B * S * Q + Q * H * E + B * S * H * E)   # q_up
        + (B * S * Q + Q * H * R + B * S * H * R)  # q_rope_up
        + 2 * (B * T * C + C * H * E + B * T * H * E)  # k_up, v_up
        + (B * S * H * E + B * T * H * E + scores)  # qk_nope
        + (B * S * H * R + B * T * R + scores)    # qk_pe
        + 3 * scores + 2 * scores                 # add; scale (an immediate)
        + 2 * (scores + B * H * S)                # row max, row sum
        + 2 * (2 * scores + B * H * S)            # subtract, divide
        + 2 * scores                              # exp
        + (scores + B * T * H * E + B * S * H * E)  # pv
        + (B * S * H * E + H * E * D + B * S * D))  # out_proj
    boundary = BF16 * (B * S * Q + B * T * C + B * T * R + Q * H * E + Q * H * R + 2 * C * H * E + H * E * D
                       + B * S * D)
    return {"macs": macs, "flops_matrix": 2 * macs, "flops_vector": vector, "transcendental": scores,
            "bytes": bytes_, "boundary_bytes": boundary}


COUNTS = {"matmul": matmul_counts, "mlp": mlp_counts, "conv2d": conv2d_counts, "attention": attention_counts,
          "mla_decode_naive": mla_decode_naive_counts}


def test_every_example_has_hand_derived_counts():
    assert {p.stem for p in EXAMPLES} <= set(COUNTS), "derive the counts of each new example below"


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_example_counts(name: str):
    g = load(ROOT / "examples" / "graphs" / f"{name}.yaml")
    want = COUNTS[name](g.rank_sizes)
    m = graph_metrics(g)
    got = {k: getattr(m, k) for k in want}
    assert got == want
    assert m.opaque == () and all(n.bytes_exact for n in m.nodes)
    if name == "attention":
        assert want["macs"] == 25_769_803_776  # 4 * 1024 * 1024 * (4 * 1024 + 2 * 1024) MACs


def test_matmul_counts_at_known_sizes():
    assert matmul_counts({"M": 1024, "N": 2048, "K": 4096})["macs"] == 2**33
