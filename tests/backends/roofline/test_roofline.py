"""Roofline bounds checked against numbers derived by hand.

Every expected value is written out from the shapes, the dtype widths and the spec's peaks
(read with ``load_spec`` so that a corrected datasheet figure does not break the test, but
combined here with the formula, never by the code under test).
"""

from __future__ import annotations

import math

import pytest

from solar_io import loads
from solar_io.backends.roofline import BoundError, bound, compute_class, inverse_roofline
from solar_io.format.yamltext import emit
from solar_io.hardware import load_spec

H100 = load_spec("h100-sxm")
B200 = load_spec("b200")
BW = 3.35e12  # H100 SXM DRAM bytes/s (datasheet)
P_BF16 = H100.peak("matrix", "bf16")  # 989.4 TFLOP/s dense
P_FP8 = H100.peak("matrix", "fp8")  # 1978.9 TFLOP/s dense
V_BF16 = H100.peak("vector", "bf16")  # 133.8 TFLOP/s
V_FP32 = H100.peak("vector", "fp32")  # 66.9 TFLOP/s
SFU = H100.peak("special", "fp32")  # 4.18125 T results/s


def close(a: float | None, b: float, rel: float = 1e-12) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


def build(ranks: dict[str, int], tensors: list[tuple], nodes: list[dict], name: str = "t"):
    """A validated graph: tensors are (name, ranks, dtype, role[, density])."""
    doc = {
        "format": "solar-io.einsum-graph", "version": "1.0", "name": name,
        "producer": {"tool": "solar-io", "tool_version": "0.1.0", "frontend": "hand-written"},
        "ranks": dict(ranks),
        "tensors": [{"name": t[0], "ranks": list(t[1]), "dtype": t[2], "role": t[3],
                     **({"density": t[4]} if len(t) > 4 else {})} for t in tensors],
        "nodes": nodes,
        "validation": {"status": "skipped", "method": "none"},
    }
    return loads(emit(doc))


def einsum(name: str, space: str, inputs: list[str], output: str, map_: str, reduce: str, **extra) -> dict:
    return {"name": name, "kind": "einsum", "op": f"test.{name}", "space": space.split(), "inputs": inputs,
            "output": output, "map": map_, "reduce": reduce, **extra}


def matmul_graph(m: int, n: int, k: int, a_dt="bf16", b_dt="bf16", c_dt="bf16", density=None):
    b = ("B", ["K", "N"], b_dt, "weight") + ((density,) if density else ())
    return build({"M": m, "N": n, "K": k},
                 [("A", ["M", "K"], a_dt, "input"), b, ("C", ["M", "N"], c_dt, "output")],
                 [einsum("mm", "M N K", ["A[M, K]", "B[K, N]"], "C[M, N]", "mul", "add")])


# ----------------------------------------------------------------------------- matmul


def test_square_matmul_is_compute_bound_on_h100():
    n = 4096
    r = bound(matmul_graph(n, n, n), H100)
    flops = 2 * n**3  # 137.4 GFLOP
    nbytes = 3 * n * n * 2  # A, B, C in bf16: 100.7 MB
    compute, memory = flops / P_BF16, nbytes / BW  # 138.9 us vs 30.0 us
    node = r.nodes[0]
    assert node.macs == n**3 and node.bytes == nbytes
    assert close(node.matrix_time, compute) and close(node.memory_time, memory)
    assert node.bottleneck == "matrix" and close(node.intensity, flops / nbytes)
    assert close(r.unfused.time, compute) and close(r.fused.time, compute)
    assert r.unfused.bottleneck == r.fused.bottleneck == "matrix"
    assert close(r.fusion_gain, 1.0)


def test_skinny_matmul_is_memory_bound_on_h100():
    m, n, k = 16, 8192, 8192
    r = bound(matmul_graph(m, n, k), H100)
    flops = 2 * m * n * k  # 2.1 GFLOP -> 2.2 us
    nbytes = (m * k + k * n + m * n) * 2  # the weight dominates: 134.7 MB -> 40.2 us
    assert close(r.nodes[0].matrix_time, flops / P_BF16)
    assert close(r.unfused.time, nbytes / BW) and r.nodes[0].bottleneck == "memory"
    assert close(r.fused.time, nbytes / BW) and r.fused.bottleneck == "memory"


def test_headroom_is_measured_over_sol():
    n = 4096
    r = bound(matmul_graph(n, n, n), H100, measured="3.1ms", cache_aware=False)
    assert close(r.unfused.headroom, 3.1e-3 / (2 * n**3 / P_BF16))
    assert r.cache_aware.computed is False and r.cache_aware.time is None and r.cache_aware.headroom is None
    r = bound(matmul_graph(n, n, n), H100, measured="3.1ms", cache_aware=True)
    assert r.cache_aware.computed and close(r.cache_aware.headroom, 3.1e-3 / r.cache_aware.time)
    assert r.cache_aware.time >= r.fused.time


# ----------------------------------------------------------------------------- conv2d


def conv_graph(r: int, stride: int, pad: int, h: int = 16, p: int = 8):
    hi = f"{stride}*P + R - {pad}" if pad else f"{stride}*P + R"
    wi = f"{stride}*Q + S - {pad}" if pad else f"{stride}*Q + S"
    node = einsum("conv", "N K P Q C R S", [f"x[N, C, {hi}, {wi}]", "w[K, C, R, S]"], "y[N, K, P, Q]", "mul", "add")
    if pad:
        node["pad"] = {"x": {"H": [pad, pad], "W": [pad, pad]}}
    return build({"N": 2, "C": 16, "H": h, "W": h, "K": 32, "R": r, "S": r, "P": p, "Q": p},
                 [("x", ["N", "C", "H", "W"], "bf16", "input"), ("w", ["K", "C", "R", "S"], "bf16", "weight"),
                  ("y", ["N", "K", "P", "Q"], "bf16", "output")], [node])


def test_conv2d_3x3_stride2_pad1():
    r = bound(conv_graph(3, 2, 1), H100)
    macs = 2 * 32 * 8 * 8 * 16 * 3 * 3  # N K P Q C R S = 589,824
    # x rows touched: 2p + r - 1 for p < 8, r < 3 covers -1..15, i.e. all 16 real rows (and columns)
    x_bytes = 2 * 16 * 16 * 16 * 2
    w_bytes = 32 * 16 * 3 * 3 * 2
    y_bytes = 2 * 32 * 8 * 8 * 2
    node = r.nodes[0]
    assert node.macs == macs and node.bytes == x_bytes + w_bytes + y_bytes
    assert close(node.matrix_time, 2 * macs / P_BF16)
    assert close(r.unfused.time, max(2 * macs / P_BF16, (x_bytes + w_bytes + y_bytes) / BW))


def test_conv2d_1x1_stride2_reads_a_quarter_of_the_input():
    r = bound(conv_graph(1, 2, 0), H100)
    macs = 2 * 32 * 8 * 8 * 16  # N K P Q C
    x_bytes = 2 * 16 * 8 * 8 * 2  # rows and columns 0, 2, ..., 14 only
    w_bytes, y_bytes = 32 * 16 * 2, 2 * 32 * 8 * 8 * 2
    assert r.nodes[0].macs == macs and r.nodes[0].bytes == x_bytes + w_bytes + y_bytes
    assert close(r.unfused.time, max(2 * macs / P_BF16, (x_bytes + w_bytes + y_bytes) / BW))


# ----------------------------------------------------------------------------- MLP and fusion


def mlp_graph(b=64, d=256, h=1024):
    return build({"B": b, "D": d, "H": h},
                 [("x", ["B", "D"], "bf16", "input"), ("w1", ["D", "H"], "bf16", "weight"),
                  ("w2", ["H", "D"], "bf16", "weight"), ("h", ["B", "H"], "bf16", "intermediate"),
                  ("a", ["B", "H"], "bf16", "intermediate"), ("y", ["B", "D"], "bf16", "output")],
                 [einsum("fc1", "B H D", ["x[B, D]", "w1[D, H]"], "h[B, H]", "mul", "add"),
                  einsum("act", "B H", ["h[B, H]"], "a[B, H]", "gelu", "none"),
                  einsum("fc2", "B D H", ["a[B, H]", "w2[H, D]"], "y[B, D]", "mul", "add")])


def test_mlp_fusion_removes_intermediate_traffic():
    b, d, h = 64, 256, 1024
    r = bound(mlp_graph(b, d, h), H100, residency=False)
    x, w, act, y = b * d * 2, d * h * 2, b * h * 2, b * d * 2  # bytes of x, w1 (= w2), h (= a), y
    fc_flops = 2 * b * d * h
    # gelu: 4 vector FLOPs and 1 transcendental per element (ops registry), bf16 -> bf16 vector peak
    gelu_vec, gelu_tr = 4 * b * h, b * h
    t_fc1 = max(fc_flops / P_BF16, (x + w + act) / BW)
    t_act = max(gelu_vec / V_BF16, gelu_tr / SFU, 2 * act / BW)
    t_fc2 = max(fc_flops / P_BF16, (act + w + y) / BW)
    assert [n.name for n in r.top()] == sorted(["fc1", "act", "fc2"], key=lambda s: -{"fc1": t_fc1, "act": t_act,
                                                                                       "fc2": t_fc2}[s])
    assert close(r.unfused.time, t_fc1 + t_act + t_fc2)
    assert r.totals.bytes == (x + w + act) + 2 * act + (act + w + y)
    boundary = x + 2 * w + y  # h and a never leave the chip
    assert r.totals.boundary_bytes == boundary
    fused = max(2 * fc_flops / P_BF16, gelu_vec / V_BF16, gelu_tr / SFU, boundary / BW)
    assert close(r.fused.time, fused) and close(r.fused.memory_time, boundary / BW)
    assert r.fused.time < r.unfused.time and close(r.fusion_gain, (t_fc1 + t_act + t_fc2) / fused)


# ----------------------------------------------------------------------------- softmax, attention, mixed dtypes


def softmax_nodes(src: str, rows: str, col: str, prefix: str = "") -> list[dict]:
    idx = f"{rows}, {col}"
    return [
        einsum(f"{prefix}max", f"{rows.replace(',', '')} {col}", [f"{src}[{idx}]"], f"{prefix}mx[{rows}]", "identity",
               "max"),
        einsum(f"{prefix}sub", f"{rows.replace(',', '')} {col}", [f"{src}[{idx}]", f"{prefix}mx[{rows}]"],
               f"{prefix}sh[{idx}]", "sub", "none"),
        einsum(f"{prefix}exp", f"{rows.replace(',', '')} {col}", [f"{prefix}sh[{idx}]"], f"{prefix}e[{idx}]", "exp",
               "none"),
        einsum(f"{prefix}sum", f"{rows.replace(',', '')} {col}", [f"{prefix}e[{idx}]"], f"{prefix}tot[{rows}]",
               "identity", "add"),
        einsum(f"{prefix}div", f"{rows.replace(',', '')} {col}", [f"{prefix}e[{idx}]", f"{prefix}tot[{rows}]"],
               f"{prefix}p[{idx}]", "div", "none"),
    ]


def test_softmax_fp32():
    b, n = 64, 4096
    g = build({"B": b, "N": n},
              [("x", ["B", "N"], "fp32", "input"), ("mx", ["B"], "fp32", "intermediate"),
               ("sh", ["B", "N"], "fp32", "intermediate"), ("e", ["B", "N"], "fp32", "intermediate"),
               ("tot", ["B"], "fp32", "intermediate"), ("p", ["B", "N"], "fp32", "output")],
              softmax_nodes("x", "B", "N"))
    r = bound(g, H100, residency=False)
    full, row = b * n * 4, b * 4  # bytes of a [B, N] and a [B] fp32 tensor
    expect = {
        "max": max((b * n - b) / V_FP32, (full + row) / BW),  # b*(n-1) max-combines
        "sub": max(b * n / V_FP32, (full + row + full) / BW),
        "exp": max(b * n / SFU, 2 * full / BW),  # one exp per element on the SFU
        "sum": max((b * n - b) / V_FP32, (full + row) / BW),
        "div": max(b * n / V_FP32, (full + row + full) / BW),
    }
    for node in r.nodes:
        assert close(node.time, expect[node.name]), node.name
        assert node.compute_dtype == "fp32"
    by = {n.name: n for n in r.nodes}
    assert close(by["exp"].special_time, b * n / SFU) and by["exp"].vector_time == 0
    assert close(by["max"].vector_time, (b * n - b) / V_FP32)
    assert close(r.unfused.time, sum(expect.values()))
    vector = (2 * (b * n - b) + 2 * b * n) / V_FP32
    assert close(r.fused.time, max(vector, b * n / SFU, 2 * full / BW))


def test_mixed_bf16_matmul_fp32_softmax_and_widest_input_rule():
    s, e = 512, 64
    tensors = [("q", ["S", "E"], "bf16", "input"), ("k", ["T", "E"], "bf16", "input"),
               ("x", ["S", "T"], "fp32", "intermediate"), ("mx", ["S"], "fp32", "intermediate"),
               ("sh", ["S", "T"], "fp32", "intermediate"), ("e", ["S", "T"], "fp32", "intermediate"),
               ("tot", ["S"], "fp32", "intermediate"), ("p", ["S", "T"], "fp32", "output")]
    nodes = [einsum("qk", "S T E", ["q[S, E]", "k[T, E]"], "x[S, T]", "mul", "add"), *softmax_nodes("x", "S", "T")]
    r = bound(build({"S": s, "T": s, "E": e}, tensors, nodes), H100, residency=False)
    by = {n.name: n for n in r.nodes}
    assert by["qk"].compute_dtype == "bf16"  # bf16 inputs, fp32 output: the inputs decide
    assert close(by["qk"].matrix_time, 2 * s * s * e / P_BF16)
    assert close(by["qk"].memory_time, (2 * s * e * 2 + s * s * 4) / BW)
    assert by["sub"].compute_dtype == "fp32" and close(by["sub"].vector_time, s * s / V_FP32)
    assert {x.key for x in r.resources} == {"matrix/bf16", "vector/fp32", "special/fp32", "dram"}
    assert compute_class(["bf16", "fp8_e4m3"]) == ("bf16",)  # widest input
    assert compute_class(["fp8_e4m3", "nvfp4"]) == ("fp8",)
    assert compute_class(["bool", "fp16"]) == ("fp16",)  # floats before masks
    assert compute_class(["fp16", "bf16"]) == ("bf16", "fp16")  # a tie: the faster peak wins


def test_attention_block():
    s, d, e = 256, 512, 64  # one head: x[S, D] -> q, k, v [S, E]; scores [S, T]; ctx [S, E]; out [S, D]
    tensors = [("x", ["S", "D"], "bf16", "input"), ("wq", ["D", "E"], "bf16", "weight"),
               ("wk", ["D", "E"], "bf16", "weight"), ("wv", ["D", "E"], "bf16", "weight"),
               ("wo", ["E", "D"], "bf16", "weight"), ("q", ["S", "E"], "bf16", "intermediate"),
               ("k", ["T", "E"], "bf16", "intermediate"), ("v", ["T", "E"], "bf16", "intermediate"),
               ("x2", ["S", "T"], "bf16", "intermediate"), ("mx", ["S"], "bf16", "intermediate"),
               ("sh", ["S", "T"], "bf16", "intermediate"), ("e", ["S", "T"], "bf16", "intermediate"),
               ("tot", ["S"], "bf16", "intermediate"), ("p", ["S", "T"], "bf16", "intermediate"),
               ("ctx", ["S", "E"], "bf16", "intermediate"), ("y", ["S", "D"], "bf16", "output")]
    nodes = [einsum("q_proj", "S E D", ["x[S, D]", "wq[D, E]"], "q[S, E]", "mul", "add"),
             einsum("k_proj", "T E D", ["x[T, D]", "wk[D, E]"], "k[T, E]", "mul", "add"),
             einsum("v_proj", "T E D", ["x[T, D]", "wv[D, E]"], "v[T, E]", "mul", "add"),
             einsum("qk", "S T E", ["q[S, E]", "k[T, E]"], "x2[S, T]", "mul", "add"),
             *softmax_nodes("x2", "S", "T"),
             einsum("pv", "S E T", ["p[S, T]", "v[T, E]"], "ctx[S, E]", "mul", "add"),
             einsum("out", "S D E", ["ctx[S, E]", "wo[E, D]"], "y[S, D]", "mul", "add")]
    r = bound(build({"S": s, "T": s, "D": d, "E": e}, tensors, nodes), H100, residency=False)
    X, W, QKV, SC, ROW = s * d * 2, d * e * 2, s * e * 2, s * s * 2, s * 2  # bytes
    expect = {
        "q_proj": max(2 * s * d * e / P_BF16, (X + W + QKV) / BW),
        "k_proj": max(2 * s * d * e / P_BF16, (X + W + QKV) / BW),
        "v_proj": max(2 * s * d * e / P_BF16, (X + W + QKV) / BW),
        "qk": max(2 * s * s * e / P_BF16, (2 * QKV + SC) / BW),
        "max": max((s * s - s) / V_BF16, (SC + ROW) / BW),
        "sub": max(s * s / V_BF16, (2 * SC + ROW) / BW),
        "exp": max(s * s / SFU, 2 * SC / BW),
        "sum": max((s * s - s) / V_BF16, (SC + ROW) / BW),
        "div": max(s * s / V_BF16, (2 * SC + ROW) / BW),
        "pv": max(2 * s * s * e / P_BF16, (SC + 2 * QKV) / BW),
        "out": max(2 * s * e * d / P_BF16, (QKV + W + X) / BW),
    }
    for node in r.nodes:
        assert close(node.time, expect[node.name]), node.name
    assert close(r.unfused.time, sum(expect.values()))
    matrix = (3 * 2 * s * d * e + 2 * 2 * s * s * e + 2 * s * e * d) / P_BF16
    vector = (2 * (s * s - s) + 2 * s * s) / V_BF16
    boundary = X + 4 * W + X  # x (read whole by the projections), four weights, y
    assert r.totals.boundary_bytes == boundary
    assert close(r.fused.time, max(matrix, vector, s * s / SFU, boundary / BW))


# ----------------------------------------------------------------------------- narrow and sparse dtypes


def test_fp8_matmul_uses_fp8_peak_and_one_byte_per_element():
    m, n, k = 2048, 2048, 8192
    r = bound(matmul_graph(m, n, k, "fp8_e4m3", "fp8_e4m3", "bf16"), H100)
    nbytes = m * k * 1 + k * n * 1 + m * n * 2
    assert r.nodes[0].compute_dtype == "fp8" and r.nodes[0].bytes == nbytes
    assert close(r.unfused.time, max(2 * m * n * k / P_FP8, nbytes / BW))


def test_nvfp4_fractional_bytes_and_fp4_peak_on_b200():
    m, n, k = 128, 4096, 4096
    r = bound(matmul_graph(m, n, k, "nvfp4", "fp4_e2m1", "bf16"), B200)
    nbytes = m * k * 4.5 / 8 + k * n * 4 / 8 + m * n * 2  # nvfp4: 4 bits + an fp8 scale per 16 values
    assert r.nodes[0].compute_dtype == "fp4" and r.nodes[0].bytes == nbytes
    assert close(r.unfused.time, max(2 * m * n * k / B200.peak("matrix", "fp4"), nbytes / B200.dram_bandwidth))


def test_fp4_on_a_chip_without_fp4_names_the_node_unless_overridden():
    g = matmul_graph(64, 64, 64, "nvfp4", "nvfp4", "bf16")
    with pytest.raises(BoundError, match=r"node 'mm'.*fp4.*--compute-dtype"):
        bound(g, H100)
    r = bound(g, H100, compute_dtype="fp4=fp8")
    assert close(r.nodes[0].matrix_time, 2 * 64**3 / P_FP8)


def test_fp6_falls_back_to_fp8_peak_with_a_note():
    r = bound(matmul_graph(256, 256, 256, "fp6_e2m3", "fp6_e2m3", "bf16"), H100)
    assert close(r.nodes[0].matrix_time, 2 * 256**3 / P_FP8)
    assert any("fp6" in n and "fp8" in n for n in r.notes)
    b = bound(matmul_graph(256, 256, 256, "fp6_e2m3", "fp6_e2m3", "bf16"), B200)  # B200 lists fp6
    assert b.nodes[0].loads[0].resource == "matrix/fp6"


def test_fp32_matmul_uses_tf32_unless_strict():
    n = 1024
    g = matmul_graph(n, n, n, "fp32", "fp32", "fp32")
    r = bound(g, H100, strict_fp32=True)  # no fp32 matrix peak on H100: the fp32 vector (CUDA core) peak
    assert r.nodes[0].loads[0].resource == "vector/fp32" and close(r.nodes[0].vector_time, 2 * n**3 / V_FP32)
    assert r.options.strict_fp32 and r.nodes[0].precision is None
    for t in (bound(g, H100), bound(g, H100, allow_tf32=True)):  # the default policy; the old flag still works
        assert t.nodes[0].loads[0].resource == "matrix/tf32" and t.nodes[0].precision == "fp32->tf32"
        assert close(t.nodes[0].matrix_time, 2 * n**3 / H100.peak("matrix", "tf32"))
    mi = load_spec("mi300x")  # lists an fp32 matrix peak
    assert bound(g, mi, strict_fp32=True).nodes[0].loads[0].resource == "matrix/fp32"
    fastest = max(("fp32", "tf32"), key=lambda d: mi.peak("matrix", d) or 0.0)
    assert bound(g, mi).nodes[0].loads[0].resource == f"matrix/{fastest}"


def test_dtype_cast_what_if():
    n = 4096
    r = bound(matmul_graph(n, n, n, "fp32", "fp32", "fp32"), H100, dtype="fp8")
    assert r.options.dtype == "fp8_e4m3" and r.nodes[0].bytes == 3 * n * n
    assert close(r.nodes[0].matrix_time, 2 * n**3 / P_FP8)


def test_sparse_weight_scales_bytes_and_effectual_work():
    """W has density 0.5: a sparse kernel performs 0.5 * MACs effectual MACs. The dense model
    (every MAC at the dense peak) takes 2MNK/P; 2:4 hardware (2x dense peak on 0.5-dense weights)
    takes 2MNK/(2P) = 0.5 * 2MNK/P; the lower bound of the models is 0.5 * 2MNK/P."""
    m, n, k = 4096, 4096, 4096
    r = bound(matmul_graph(m, n, k, density=0.5), H100)
    node = r.nodes[0]
    assert node.effectual_fraction == 0.5 and node.macs == m * n * k  # dense counts are reported as such
    assert node.bytes == m * k * 2 + 0.5 * k * n * 2 + m * n * 2
    dense_model = 2 * m * n * k / P_BF16
    structured_2_4 = 2 * m * n * k / (2 * P_BF16)
    assert close(node.matrix_time, min(dense_model, structured_2_4))
    assert close(node.matrix_time, 0.5 * 2 * m * n * k / P_BF16)
    assert close(r.unfused.time, max(0.5 * 2 * m * n * k / P_BF16, node.bytes / BW))


# ----------------------------------------------------------------------------- opaque and unpriced work


def test_opaque_node_counts_bytes_and_is_reported():
    g = build({"B": 8, "N": 1024, "K": 4},
              [("scores", ["B", "N"], "fp32", "input"), ("vals", ["B", "K"], "fp32", "output"),
               ("idx", ["B", "K"], "int64", "output")],
              [{"name": "topk", "kind": "opaque", "op": "aten.topk", "inputs": ["scores"], "outputs": ["vals", "idx"],
                "reason": "data-dependent selection"}])
    r = bound(g, H100)
    nbytes = 8 * 1024 * 4 + 8 * 4 * 4 + 8 * 4 * 8
    node = r.nodes[0]
    assert r.opaque == ("topk",) and node.compute_known is False and node.compute_time == 0
    assert node.bytes == nbytes and close(r.unfused.time, nbytes / BW) and close(r.fused.time, nbytes / BW)


def test_chip_without_a_vector_unit_leaves_vector_work_unpriced():
    r = bound(mlp_graph(), "tpu-v5e")
    assert ("act", "vector") in r.unpriced and ("act", "transcendental") in r.unpriced
    assert r.nodes[1].vector_time == 0 and r.nodes[1].unpriced == ("vector", "transcendental")


def test_fp8_elementwise_runs_at_the_fastest_vector_peak_that_holds_it():
    g = build({"N": 1 << 20}, [("a", ["N"], "fp8_e4m3", "input"), ("b", ["N"], "fp8_e4m3", "output")],
              [einsum("r", "N", ["a[N]"], "b[N]", "relu", "none")])
    r = bound(g, H100)  # fp16 and bf16 vector peaks (133.8 T) beat fp32 (66.9 T)
    assert close(r.nodes[0].vector_time, (1 << 20) / max(V_BF16, H100.peak("vector", "fp16")))


def test_errors_are_one_line():
    g = mlp_graph()
    for kwargs, pattern in [({"measured": "fast"}, "--measured"), ({"target_rate": "0Hz"}, "--target-rate"),
                            ({"target_latency": "1ms", "target_rate": "1Hz"}, "not both"),
                            ({"compute_dtype": "fp9"}, "--compute-dtype"), ({"dtype": "fp7"}, "--dtype")]:
        with pytest.raises(BoundError, match=pattern) as e:
            bound(g, H100, **kwargs)
        assert "\n" not in str(e.value)


# ----------------------------------------------------------------------------- inverse roofline


def mm_relu_graph(n: int = 4096):
    return build({"M": n, "N": n, "K": n},
                 [("A", ["M", "K"], "bf16", "input"), ("B", ["K", "N"], "bf16", "weight"),
                  ("C", ["M", "N"], "bf16", "intermediate"), ("y", ["M", "N"], "bf16", "output")],
                 [einsum("mm", "M N K", ["A[M, K]", "B[K, N]"], "C[M, N]", "mul", "add"),
                  einsum("relu", "M N", ["C[M, N]"], "y[M, N]", "relu", "none")])


def test_inverse_roofline_by_hand():
    n = 4096
    F, V = 2 * n**3, n * n  # matrix FLOPs of mm, vector FLOPs of relu
    B1, B2 = 3 * n * n * 2, 2 * n * n * 2  # bytes of mm (A, B, C) and relu (C, y)
    c1, m1, v2, m2 = F / P_BF16, B1 / BW, V / V_BF16, B2 / BW
    assert c1 > m1 and m2 > v2  # mm compute-bound, relu memory-bound
    t_chip = c1 + m2

    # Infeasible target: half the chip's bound.
    target = t_chip / 2
    inv = bound(mm_relu_graph(n), H100, target_latency=target, residency=False).inverse
    u = inv.fidelity("unfused")
    assert not u.feasible and close(u.chip_scale, 2.0)
    req = {q.resource: q for q in u.requirements}
    # matrix alone: max(F/x, m1) + m2 = target -> F/x = target - m2 (still >= m1)
    assert target - m2 >= m1 and close(req["matrix/bf16"].with_chip_rest, F / (target - m2))
    assert req["dram"].with_chip_rest is None  # mm's compute alone exceeds the target
    assert req["vector/bf16"].with_chip_rest is None
    assert close(req["matrix/bf16"].any_chip, F / target) and close(req["dram"].any_chip, (B1 + B2) / target)
    assert req["matrix/bf16"].binding and req["dram"].binding and not req["vector/bf16"].binding

    # Feasible target where mm stays compute-bound while DRAM shrinks: c1 + B2/x = target.
    target = 2.0e-4
    assert t_chip < target < c1 * (1 + B2 / B1)
    u = bound(mm_relu_graph(n), H100, target_latency=target, residency=False).inverse.fidelity("unfused")
    req = {q.resource: q for q in u.requirements}
    x = B2 / (target - c1)
    assert B1 / x <= c1 and close(req["dram"].with_chip_rest, x, 1e-9)
    assert close(req["matrix/bf16"].with_chip_rest, F / (target - m2), 1e-9)
    assert u.feasible and close(u.chip_scale, t_chip / target)

    # Fused: T = max(F/P, v2, boundary/BW) with boundary = A + B + y.
    f = bound(mm_relu_graph(n), H100, target_rate="5kHz").inverse.fidelity("fused")
    target = 1 / 5000
    req = {q.resource: q for q in f.requirements}
    assert close(f.chip_time, c1) and close(req["matrix/bf16"].with_chip_rest, F / target)
    assert close(req["dram"].with_chip_rest, 3 * n * n * 2 / target)


def test_inverse_at_sol_returns_the_binding_resource():
    r = bound(mm_relu_graph(), H100)
    for name in ("unfused", "fused"):
        f = inverse_roofline(r, getattr(r, name).time).fidelity(name)
        assert f.feasible and f.chip_scale == 1.0
        binding = [q for q in f.requirements if q.binding]
        assert binding
        for q in f.requirements:
            if q.binding:
                assert q.with_chip_rest_ratio == pytest.approx(1.0, rel=1e-9, abs=0)
            else:
                assert q.with_chip_rest_ratio < 1.0
