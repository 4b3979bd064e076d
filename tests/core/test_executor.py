"""The reference executor against numpy and hand-written loops, node kind by node kind.

Graphs are written as YAML text (the format itself) and loaded with ``solar_io.loads``.
Every reference here is computed independently of the executor: numpy slicing loops for
convolution and pooling, explicit formulas for softmax, layernorm and attention, and a
point-by-point interpreter of the format's semantics for random affine einsums.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import graphs

import solar_io
from solar_io import ExecutionError, execute, loads
from solar_io import executor as executor_module
from solar_io.dtypes import numpy_dtype
from solar_io.format.yamltext import format_float
from solar_io.ops import MAP_OPS

RNG = np.random.default_rng(1234)


def make(ranks: dict[str, int], tensors: dict[str, tuple], nodes: str, version: str = "1.0") -> solar_io.Graph:
    """A validated graph: ``tensors`` maps name -> (ranks "A B", role[, dtype[, value]])."""
    lines = ["format: solar-io.einsum-graph", f'version: "{version}"', "producer:", "  tool: solar-io",
             "  tool_version: 0.1.0", "  frontend: hand-written", "ranks:"]
    lines += [f"  {r}: {n}" for r, n in ranks.items()]
    lines.append("tensors:")
    for name, spec in tensors.items():
        rk, role, dtype, value = (*spec, "fp32", None)[:4] if len(spec) == 2 else (*spec, None)[:4]
        lines += [f"- name: {name}", f"  ranks: [{', '.join(rk.split())}]", f"  dtype: {dtype}", f"  role: {role}"]
        if value is not None:
            lines.append(f"  value: {format_float(value) if isinstance(value, float) else value}")
    lines.append("nodes:")
    lines.append(textwrap.dedent(nodes).strip("\n"))
    lines += ["validation:", "  status: skipped", "  method: none"]
    return loads("\n".join(lines) + "\n")


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def close(a: np.ndarray, b: np.ndarray, rtol: float = 1e-4, atol: float = 1e-4) -> None:
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- contractions

MATMUL = """
- name: mm
  kind: einsum
  op: aten.mm
  space: [M, N, K]
  inputs: ["A[M, K]", "B[K, N]"]
  output: C[M, N]
  map: mul
  reduce: add
"""


def test_matmul():
    g = make({"M": 5, "N": 7, "K": 3}, {"A": ("M K", "input"), "B": ("K N", "weight"), "C": ("M N", "output")},
             MATMUL)
    a, b = randn(5, 3), randn(3, 7)
    out = execute(g, {"A": a, "B": b})
    assert set(out) == {"C"} and out["C"].dtype == np.float32
    close(out["C"], a @ b)


def test_matmul_transposed_operand_and_output_order():
    g = make({"M": 4, "N": 6, "K": 5}, {"A": ("K M", "input"), "B": ("N K", "input"), "C": ("N M", "output")}, """
    - name: mm
      kind: einsum
      op: mm
      space: [K, N, M]
      inputs: ["A[K, M]", "B[N, K]"]
      output: C[N, M]
      map: mul
      reduce: add
    """)
    a, b = randn(5, 4), randn(6, 5)
    close(execute(g, {"A": a, "B": b})["C"], (a.T @ b.T).T)


def test_batched_and_three_operand_contractions():
    g = make({"B": 3, "M": 4, "N": 5, "K": 6},
             {"x": ("B M K", "input"), "y": ("B K N", "input"), "s": ("K", "input"), "z": ("B M N", "output"),
              "w": ("B M N", "output")}, """
    - name: bmm
      kind: einsum
      op: bmm
      space: [B, M, N, K]
      inputs: ["x[B, M, K]", "y[B, K, N]"]
      output: z[B, M, N]
      map: mul
      reduce: add
    - name: scaled_bmm
      kind: einsum
      op: bmm3
      space: [B, M, N, K]
      inputs: ["x[B, M, K]", "y[B, K, N]", "s[K]"]
      output: w[B, M, N]
      map: mul
      reduce: add
    """)
    x, y, s = randn(3, 4, 6), randn(3, 6, 5), randn(6)
    out = execute(g, {"x": x, "y": y, "s": s})
    close(out["z"], x @ y)
    close(out["w"], (x * s) @ y)


def test_ranks_no_operand_uses_are_broadcast_or_repeated():
    # y[M, J] = sum over K of a[M] * b[M]: J is broadcast, K repeats the same product.
    g = make({"M": 4, "J": 3, "K": 5}, {"a": ("M", "input"), "b": ("M", "input"), "y": ("M J", "output"),
                                        "m": ("M", "output")}, """
    - name: n
      kind: einsum
      op: x
      space: [M, J, K]
      inputs: ["a[M]", "b[M]"]
      output: y[M, J]
      map: mul
      reduce: add
    - name: mx
      kind: einsum
      op: x
      space: [M, K]
      inputs: ["a[M]"]
      output: m[M]
      map: identity
      reduce: max
    """)
    a, b = randn(4), randn(4)
    out = execute(g, {"a": a, "b": b})
    close(out["y"], np.repeat((5 * a * b)[:, None], 3, axis=1))
    close(out["m"], a)


def test_mlp_bias_relu():
    g = make({"B": 4, "D": 6, "H": 8, "O": 3},
             {"x": ("B D", "input"), "w1": ("D H", "weight"), "b1": ("H", "weight"), "w2": ("H O", "weight"),
              "b2": ("O", "weight"), "h": ("B H", "intermediate"), "hb": ("B H", "intermediate"),
              "a": ("B H", "intermediate"), "z": ("B O", "intermediate"), "y": ("B O", "output")}, """
    - {name: fc1, kind: einsum, op: mm, space: [B, H, D], inputs: ["x[B, D]", "w1[D, H]"], output: "h[B, H]",
       map: mul, reduce: add}
    - {name: bias1, kind: einsum, op: add, space: [B, H], inputs: ["h[B, H]", "b1[H]"], output: "hb[B, H]",
       map: add, reduce: none}
    - {name: act, kind: einsum, op: relu, space: [B, H], inputs: ["hb[B, H]"], output: "a[B, H]", map: relu,
       reduce: none}
    - {name: fc2, kind: einsum, op: mm, space: [B, O, H], inputs: ["a[B, H]", "w2[H, O]"], output: "z[B, O]",
       map: mul, reduce: add}
    - {name: bias2, kind: einsum, op: add, space: [B, O], inputs: ["z[B, O]", "b2[O]"], output: "y[B, O]",
       map: add, reduce: none}
    """)
    v = {"x": randn(4, 6), "w1": randn(6, 8), "b1": randn(8), "w2": randn(8, 3), "b2": randn(3)}
    ref = np.maximum(v["x"] @ v["w1"] + v["b1"], 0) @ v["w2"] + v["b2"]
    close(execute(g, v)["y"], ref)
    everything = execute(g, v, outputs="all")
    assert set(everything) == {t.name for t in g.tensors}
    close(everything["a"], np.maximum(v["x"] @ v["w1"] + v["b1"], 0))


# ----------------------------------------------------------------------------- convolution and pooling

def conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dil: int) -> np.ndarray:
    """Direct convolution: a sum over kernel offsets of strided slices of the padded input."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    p = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    q = (wd + 2 * pad - dil * (s - 1) - 1) // stride + 1
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad), dtype=np.float64)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    out = np.zeros((n, k, p, q))
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i * dil: i * dil + stride * (p - 1) + 1: stride, j * dil: j * dil + stride * (q - 1) + 1:
                       stride]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j].astype(np.float64), optimize=True)
    return out


def conv_graph(n: int, c: int, h: int, k: int, r: int, stride: int, pad: int, dil: int) -> solar_io.Graph:
    p = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    idx = " + ".join(t for t in (f"{stride}*P" if stride > 1 else "P", f"{dil}*R" if dil > 1 else "R") if t)
    idx_w = idx.replace("P", "Q").replace("R", "S")
    return make({"N": n, "C": c, "H": h, "W": h, "K": k, "R": r, "S": r, "P": p, "Q": p},
                {"x": ("N C H W", "input"), "w": ("K C R S", "weight"), "b": ("K", "weight"),
                 "acc": ("N K P Q", "intermediate"), "y": ("N K P Q", "output")}, f"""
    - name: conv
      kind: einsum
      op: aten.convolution
      space: [N, K, P, Q, C, R, S]
      inputs: ["x[N, C, {idx} - {pad}, {idx_w} - {pad}]", "w[K, C, R, S]"]
      output: acc[N, K, P, Q]
      map: mul
      reduce: add
      pad: {{x: {{H: [{pad}, {pad}], W: [{pad}, {pad}]}}}}
    - name: bias
      kind: einsum
      op: aten.add
      space: [N, K, P, Q]
      inputs: ["acc[N, K, P, Q]", "b[K]"]
      output: y[N, K, P, Q]
      map: add
      reduce: none
    """)


@pytest.mark.parametrize("stride,pad,dil", [(1, 0, 1), (1, 1, 1), (2, 1, 1), (2, 2, 2), (3, 1, 2)])
def test_conv2d_stride_padding_dilation(stride: int, pad: int, dil: int):
    g = conv_graph(2, 3, 9, 4, 3, stride, pad, dil)
    x, w, b = randn(2, 3, 9, 9), randn(4, 3, 3, 3), randn(4)
    ref = conv_reference(x, w, stride, pad, dil) + b[None, :, None, None]
    close(execute(g, {"x": x, "w": w, "b": b})["y"], ref)


def test_conv2d_naive_loop():
    """One small case against a literal six-deep loop, the definition of convolution."""
    g = conv_graph(1, 2, 5, 2, 3, 2, 1, 1)
    x, w, b = randn(1, 2, 5, 5), randn(2, 2, 3, 3), randn(2)
    out = np.zeros((1, 2, 3, 3))
    for k, p, q, c, r, s in itertools.product(range(2), range(3), range(3), range(2), range(3), range(3)):
        hh, ww = 2 * p + r - 1, 2 * q + s - 1
        if 0 <= hh < 5 and 0 <= ww < 5:
            out[0, k, p, q] += x[0, c, hh, ww] * w[k, c, r, s]
    close(execute(g, {"x": x, "w": w, "b": b})["y"], out + b[None, :, None, None])


@pytest.mark.parametrize("cg,kg", [(2, 3), (1, 1)])  # grouped, then depthwise
def test_grouped_and_depthwise_conv(cg: int, kg: int):
    groups, n, h = 3, 2, 6
    g = make({"N": n, "G": groups, "C": cg, "K": kg, "F": groups * kg, "CI": groups * cg, "H": h, "W": h, "R": 3,
              "S": 3},
             {"x": ("N CI H W", "input"), "w": ("F C R S", "weight"), "yg": ("N G K H W", "intermediate"),
              "y": ("N F H W", "output")}, f"""
    - name: gconv
      kind: einsum
      op: aten.convolution
      space: [N, G, K, H, W, C, R, S]
      inputs: ["x[N, {cg}*G + C, H + R - 1, W + S - 1]", "w[{kg}*G + K, C, R, S]"]
      output: yg[N, G, K, H, W]
      map: mul
      reduce: add
      pad: {{x: {{H: [1, 1], W: [1, 1]}}}}
    - name: merge
      kind: data_movement
      op: aten.view
      movement: reshape
      view: true
      inputs: [yg]
      output: y
    """)
    x, w = randn(n, groups * cg, h, h), randn(groups * kg, cg, 3, 3)
    ref = np.concatenate([conv_reference(x[:, i * cg:(i + 1) * cg], w[i * kg:(i + 1) * kg], 1, 1, 1)
                          for i in range(groups)], axis=1)
    close(execute(g, {"x": x, "w": w})["y"], ref)


POOL = """
- name: pool
  kind: einsum
  op: aten.max_pool2d
  space: [N, C, P, Q, R, S]
  inputs: ["x[N, C, 2*P + R - 1, 2*Q + S - 1]"]
  output: y[N, C, P, Q]
  map: identity
  reduce: max
  pad: {x: {H: [1, 1], W: [1, 1]}}
  fill: -.inf
"""


def test_max_pool_pads_with_minus_infinity():
    g = make({"N": 2, "C": 3, "H": 8, "W": 8, "P": 4, "Q": 4, "R": 3, "S": 3},
             {"x": ("N C H W", "input"), "y": ("N C P Q", "output")}, POOL)
    x = -np.abs(randn(2, 3, 8, 8)) - 1.0  # all negative: a zero border would win every edge window
    xp = np.full((2, 3, 10, 10), -np.inf, dtype=np.float32)
    xp[:, :, 1:9, 1:9] = x
    ref = np.full((2, 3, 4, 4), -np.inf, dtype=np.float32)
    for r, s in itertools.product(range(3), range(3)):
        ref = np.maximum(ref, xp[:, :, r: r + 7: 2, s: s + 7: 2])
    out = execute(g, {"x": x})["y"]
    np.testing.assert_array_equal(out, ref)
    assert (out < 0).all()


def test_avg_pool():
    g = make({"N": 2, "C": 3, "H": 6, "W": 6, "P": 3, "Q": 3, "R": 2, "S": 2},
             {"x": ("N C H W", "input"), "area": ("", "constant", "fp32", 4.0), "s": ("N C P Q", "intermediate"),
              "y": ("N C P Q", "output")}, """
    - {name: window_sum, kind: einsum, op: avg_pool, space: [N, C, P, Q, R, S], inputs: ["x[N, C, 2*P + R, 2*Q + S]"],
       output: "s[N, C, P, Q]", map: identity, reduce: add}
    - {name: divide, kind: einsum, op: avg_pool, space: [N, C, P, Q], inputs: ["s[N, C, P, Q]", "area[]"],
       output: "y[N, C, P, Q]", map: div, reduce: none}
    """)
    x = randn(2, 3, 6, 6)
    close(execute(g, {"x": x})["y"], x.reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5)))


# ----------------------------------------------------------------------------- normalisation and attention

SOFTMAX_NODES = """
- {name: row_max, kind: einsum, op: amax, space: [B, V], inputs: ["x[B, V]"], output: "m[B]", map: identity,
   reduce: max}
- {name: shift, kind: einsum, op: sub, space: [B, V], inputs: ["x[B, V]", "m[B]"], output: "z[B, V]", map: sub,
   reduce: none}
- {name: expo, kind: einsum, op: exp, space: [B, V], inputs: ["z[B, V]"], output: "e[B, V]", map: exp, reduce: none}
- {name: total, kind: einsum, op: sum, space: [B, V], inputs: ["e[B, V]"], output: "s[B]", map: identity,
   reduce: add}
- {name: norm, kind: einsum, op: div, space: [B, V], inputs: ["e[B, V]", "s[B]"], output: "p[B, V]", map: div,
   reduce: none}
"""
SOFTMAX_TENSORS = {"x": ("B V", "input"), "m": ("B", "intermediate"), "z": ("B V", "intermediate"),
                   "e": ("B V", "intermediate"), "s": ("B", "intermediate"), "p": ("B V", "output")}


def np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_as_extended_einsums():
    g = make({"B": 5, "V": 11}, SOFTMAX_TENSORS, SOFTMAX_NODES)
    x = randn(5, 11) * 10
    p = execute(g, {"x": x})["p"]
    close(p, np_softmax(x))
    close(p.sum(axis=1), np.ones(5))


def test_layernorm():
    d, eps = 16, 1e-5
    g = make({"B": 4, "D": d}, {
        "x": ("B D", "input"), "gamma": ("D", "weight"), "beta": ("D", "weight"),
        "inv_d": ("", "constant", "fp32", 1 / d), "eps": ("", "constant", "fp32", eps),
        "total": ("B", "intermediate"), "mean": ("B", "intermediate"), "xc": ("B D", "intermediate"),
        "sq": ("B D", "intermediate"), "sqsum": ("B", "intermediate"), "var": ("B", "intermediate"),
        "vare": ("B", "intermediate"), "rstd": ("B", "intermediate"), "xn": ("B D", "intermediate"),
        "xg": ("B D", "intermediate"), "y": ("B D", "output")}, """
    - {name: sum, kind: einsum, op: mean, space: [B, D], inputs: ["x[B, D]"], output: "total[B]", map: identity,
       reduce: add}
    - {name: mean, kind: einsum, op: mean, space: [B], inputs: ["total[B]", "inv_d[]"], output: "mean[B]", map: mul,
       reduce: none}
    - {name: center, kind: einsum, op: sub, space: [B, D], inputs: ["x[B, D]", "mean[B]"], output: "xc[B, D]",
       map: sub, reduce: none}
    - {name: square, kind: einsum, op: pow, space: [B, D], inputs: ["xc[B, D]"], output: "sq[B, D]", map: square,
       reduce: none}
    - {name: sqsum, kind: einsum, op: mean, space: [B, D], inputs: ["sq[B, D]"], output: "sqsum[B]", map: identity,
       reduce: add}
    - {name: var, kind: einsum, op: mean, space: [B], inputs: ["sqsum[B]", "inv_d[]"], output: "var[B]", map: mul,
       reduce: none}
    - {name: add_eps, kind: einsum, op: add, space: [B], inputs: ["var[B]", "eps[]"], output: "vare[B]", map: add,
       reduce: none}
    - {name: rsqrt, kind: einsum, op: rsqrt, space: [B], inputs: ["vare[B]"], output: "rstd[B]", map: rsqrt,
       reduce: none}
    - {name: normalize, kind: einsum, op: mul, space: [B, D], inputs: ["xc[B, D]", "rstd[B]"], output: "xn[B, D]",
       map: mul, reduce: none}
    - {name: scale, kind: einsum, op: mul, space: [B, D], inputs: ["xn[B, D]", "gamma[D]"], output: "xg[B, D]",
       map: mul, reduce: none}
    - {name: shift, kind: einsum, op: add, space: [B, D], inputs: ["xg[B, D]", "beta[D]"], output: "y[B, D]",
       map: add, reduce: none}
    """)
    x, gamma, beta = randn(4, d) * 3 + 1, randn(d), randn(d)
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    close(execute(g, {"x": x, "gamma": gamma, "beta": beta})["y"], (x - mu) / np.sqrt(var + eps) * gamma + beta,
          rtol=1e-4, atol=1e-4)


def attention_graph(causal: bool) -> solar_io.Graph:
    """softmax(q k^T * scale [masked]) v, the softmax written as extended einsums."""
    tensors = {"q": ("S E", "input"), "k": ("T E", "input"), "v": ("T E", "input"),
               "scale": ("", "constant", "fp32", 0.25), "scores": ("S T", "intermediate"),
               "ss": ("S T", "intermediate"), "x": ("S T", "intermediate"), "m": ("S", "intermediate"),
               "z": ("S T", "intermediate"), "e": ("S T", "intermediate"), "s": ("S", "intermediate"),
               "p": ("S T", "intermediate"), "o": ("S E", "output")}
    if causal:
        tensors.update({"mask": ("S T", "constant", "bool"), "neg": ("", "constant", "fp32", "-.inf")})
        mask = """
    - {name: mask, kind: einsum, op: where, space: [S, T], inputs: ["mask[S, T]", "ss[S, T]", "neg[]"],
       output: "x[S, T]", map: where, reduce: none}"""
    else:
        mask = """
    - {name: keep, kind: data_movement, op: clone, movement: copy, space: [S, T], inputs: ["ss[S, T]"],
       output: "x[S, T]"}"""
    softmax = SOFTMAX_NODES.replace("B, V", "S, T").replace("[B]", "[S]")
    nodes = """
    - {name: qk, kind: einsum, op: matmul, space: [S, T, E], inputs: ["q[S, E]", "k[T, E]"], output: "scores[S, T]",
       map: mul, reduce: add}
    - {name: scale, kind: einsum, op: mul, space: [S, T], inputs: ["scores[S, T]", "scale[]"], output: "ss[S, T]",
       map: mul, reduce: none}""" + mask + "\n" + textwrap.indent(softmax.strip("\n"), "    ") + """
    - {name: pv, kind: einsum, op: matmul, space: [S, E, T], inputs: ["p[S, T]", "v[T, E]"], output: "o[S, E]",
       map: mul, reduce: add}
    """
    return make({"S": 6, "T": 6, "E": 16}, tensors, nodes)


@pytest.mark.parametrize("causal", [False, True])
def test_attention(causal: bool):
    g = attention_graph(causal)
    q, k, v = randn(6, 16), randn(6, 16), randn(6, 16)
    scores = q @ k.T * 0.25
    feeds = {"q": q, "k": k, "v": v}
    if causal:
        mask = np.tril(np.ones((6, 6), dtype=bool))
        scores = np.where(mask, scores, -np.inf)
        feeds["mask"] = mask
    out = execute(g, feeds)["o"]
    close(out, np_softmax(scores) @ v)
    if causal:
        close(out[0], v[0])  # the first query sees only the first key


# ----------------------------------------------------------------------------- data movement

def test_gather_embedding():
    g = make({"B": 2, "S": 3, "V": 10, "D": 4},
             {"emb": ("V D", "weight"), "ids": ("B S", "input", "int64"), "y": ("B S D", "output")}, """
    - name: lookup
      kind: data_movement
      op: aten.embedding
      movement: copy
      space: [B, S, D]
      inputs: ["emb[@ids, D]", "ids[B, S]"]
      output: y[B, S, D]
    """)
    emb, ids = randn(10, 4), np.array([[0, 9, 3], [3, 3, 7]])
    np.testing.assert_array_equal(execute(g, {"emb": emb, "ids": ids})["y"], emb[ids])
    with pytest.raises(ExecutionError, match=r"index tensor ids holds values in \[0, 10\].*emb dim V"):
        execute(g, {"emb": emb, "ids": np.array([[0, 10, 3], [3, 3, 7]])})


def test_einsum_gather_index_inputs_are_not_map_arguments():
    # token embedding + position embedding: ids only say which rows of tok are read.
    g = make({"B": 2, "S": 3, "V": 10, "D": 4},
             {"tok": ("V D", "weight"), "ids": ("B S", "input", "int64"), "pos": ("S D", "weight"),
              "y": ("B S D", "output")}, """
    - {name: embed, kind: einsum, op: embedding_add, space: [B, S, D], inputs: ["tok[@ids, D]", "ids[B, S]",
       "pos[S, D]"], output: "y[B, S, D]", map: add, reduce: none}
    """)
    tok, pos, ids = randn(10, 4), randn(3, 4), np.array([[1, 2, 3], [9, 9, 0]])
    close(execute(g, {"tok": tok, "ids": ids, "pos": pos})["y"], tok[ids] + pos)


def test_gather_along_inner_dim_with_index_from_other_ranks():
    # y[B, J] = x[B, idx[J]]: torch.index_select(x, 1, idx)
    g = make({"B": 3, "C": 5, "J": 4}, {"x": ("B C", "input"), "idx": ("J", "input", "int32"),
                                        "y": ("B J", "output")}, """
    - {name: sel, kind: data_movement, op: index_select, movement: copy, space: [B, J],
       inputs: ["x[B, @idx]", "idx[J]"], output: "y[B, J]"}
    """)
    x, idx = randn(3, 5), np.array([4, 0, 0, 2])
    np.testing.assert_array_equal(execute(g, {"x": x, "idx": idx})["y"], x[:, idx])


def test_reshape_permute_slice_pad_concat():
    g = make({"A": 2, "B": 3, "C": 4, "F": 24, "P": 5, "X": 9, "Y": 6, "Z": 15, "E": 11},
             {"x": ("A B C", "input"), "s": ("X", "input"), "u": ("Y", "input"),
              "flat": ("F", "output"), "perm": ("C A B", "output"), "sl": ("P", "output"),
              "padded": ("E", "output"), "cat": ("Z", "output")}, """
    - {name: flatten, kind: data_movement, op: view, movement: reshape, view: true, inputs: [x], output: flat}
    - {name: permute, kind: data_movement, op: permute, movement: copy, space: [C, A, B], inputs: ["x[A, B, C]"],
       output: "perm[C, A, B]"}
    - {name: slice, kind: data_movement, op: slice, movement: copy, space: [P], inputs: ["s[P + 2]"], output: "sl[P]"}
    - {name: pad, kind: data_movement, op: constant_pad, movement: copy, space: [E], inputs: ["s[E - 1]"],
       output: "padded[E]", pad: {s: {X: [1, 1]}}, fill: 7.0}
    - {name: cat, kind: data_movement, op: cat, movement: concat, axis: Z, inputs: [s, u], output: cat}
    """)
    x, s, u = randn(2, 3, 4), randn(9), randn(6)
    out = execute(g, {"x": x, "s": s, "u": u})
    np.testing.assert_array_equal(out["flat"], x.reshape(24))
    np.testing.assert_array_equal(out["perm"], x.transpose(2, 0, 1))
    np.testing.assert_array_equal(out["sl"], s[2:7])
    np.testing.assert_array_equal(out["padded"], np.concatenate([[7.0], s, [7.0]]).astype(np.float32))
    np.testing.assert_array_equal(out["cat"], np.concatenate([s, u]))
    assert out["flat"].flags.writeable and not np.shares_memory(out["flat"], x)


def test_concat_along_inner_axis_and_broadcast_copy():
    g = make({"A": 2, "B": 3, "C": 4, "D": 7},
             {"x": ("A B", "input"), "y": ("A C", "input"), "z": ("A D", "output"), "w": ("A C B", "output")}, """
    - {name: cat, kind: data_movement, op: cat, movement: concat, axis: D, inputs: [x, y], output: z}
    - {name: bcast, kind: data_movement, op: expand, movement: copy, space: [A, C, B], inputs: ["x[A, B]"],
       output: "w[A, C, B]"}
    """)
    x, y = randn(2, 3), randn(2, 4)
    out = execute(g, {"x": x, "y": y})
    np.testing.assert_array_equal(out["z"], np.concatenate([x, y], axis=1))
    np.testing.assert_array_equal(out["w"], np.broadcast_to(x[:, None, :], (2, 4, 3)))


def test_diagonal_access():
    g = make({"I": 5, "J": 5}, {"m": ("I J", "input"), "t": ("", "output"), "d": ("I", "output")}, """
    - {name: trace, kind: einsum, op: trace, space: [I], inputs: ["m[I, I]"], output: "t[]", map: identity,
       reduce: add}
    - {name: diag, kind: data_movement, op: diagonal, movement: copy, space: [I], inputs: ["m[I, I]"],
       output: "d[I]"}
    """)
    m = randn(5, 5)
    out = execute(g, {"m": m})
    assert out["t"].shape == ()
    close(out["t"], np.trace(m))
    np.testing.assert_array_equal(out["d"], np.diag(m))


# ----------------------------------------------------------------------------- reductions, dtypes

ARGMAX = """
- {name: best, kind: einsum, op: argmax, space: [B, V], inputs: ["x[B, V]"], output: "i[B]", map: identity,
   reduce: argmax}
- {name: worst, kind: einsum, op: argmin, space: [B, V], inputs: ["x[B, V]"], output: "j[B]", map: identity,
   reduce: argmin}
"""


def test_argmax_argmin_first_on_ties():
    g = make({"B": 3, "V": 5}, {"x": ("B V", "input"), "i": ("B", "output", "int64"), "j": ("B", "output", "int32")},
             ARGMAX)
    x = np.array([[1, 3, 3, 0, 0], [2, 2, 2, 2, 2], [-1, 5, -4, 5, -4]], dtype=np.float32)
    out = execute(g, {"x": x})
    assert out["i"].dtype == np.int64
    np.testing.assert_array_equal(out["i"], [1, 0, 1])
    np.testing.assert_array_equal(out["j"], [3, 0, 2])


def test_integer_and_fp64_tensors_compute_in_their_numpy_dtype():
    g = make({"N": 4}, {"a": ("N", "input", "int8"), "b": ("N", "input", "int32"), "c": ("N", "output", "int16"),
                        "d": ("N", "input", "fp64"), "e": ("N", "output", "fp64"), "f": ("N", "output", "bool")}, """
    - {name: add, kind: einsum, op: add, space: [N], inputs: ["a[N]", "b[N]"], output: "c[N]", map: add, reduce: none}
    - {name: sq, kind: einsum, op: sq, space: [N], inputs: ["d[N]"], output: "e[N]", map: square, reduce: none}
    - {name: cmp, kind: einsum, op: lt, space: [N], inputs: ["a[N]", "d[N]"], output: "f[N]", map: lt,
       reduce: none}
    """)
    d = np.array([1e-200, 2.0, 3.0, 1e150])
    out = execute(g, {"a": np.array([1, 2, 3, 4]), "b": np.array([10, 20, 30, 2**40]), "d": d})
    assert out["c"].dtype == np.int64 and out["e"].dtype == np.float64 and out["f"].dtype == np.bool_
    np.testing.assert_array_equal(out["c"], [11, 22, 33, 2**40 + 4])
    np.testing.assert_array_equal(out["e"], d * d)
    np.testing.assert_array_equal(out["f"], [False, False, False, True])


# ----------------------------------------------------------------------------- opaque nodes and errors

OPAQUE = """
- {name: sorter, kind: opaque, op: aten.sort, inputs: [x], outputs: [vals, idx], reason: no einsum for sort}
"""
OPAQUE_TENSORS = {"x": ("N", "input"), "vals": ("N", "output"), "idx": ("N", "output", "int64")}


def test_opaque_with_and_without_an_implementation():
    g = make({"N": 6}, OPAQUE_TENSORS, OPAQUE)
    x = randn(6)
    with pytest.raises(ExecutionError, match=r"opaque node sorter \(op aten\.sort\) has no implementation"):
        execute(g, {"x": x})
    by_op = execute(g, {"x": x}, opaque={"aten.sort": lambda a: (np.sort(a), np.argsort(a))})
    np.testing.assert_array_equal(by_op["vals"], np.sort(x))
    np.testing.assert_array_equal(by_op["idx"], np.argsort(x))
    by_name = execute(g, {"x": x}, opaque={"sorter": lambda a: [-a, np.zeros(6, dtype=int)],
                                           "aten.sort": None})
    np.testing.assert_array_equal(by_name["vals"], -x)
    with pytest.raises(ExecutionError, match=r"output vals must have shape \(6,\), got \(5,\)"):
        execute(g, {"x": x}, opaque={"sorter": lambda a: (a[:5], a)})
    with pytest.raises(ExecutionError, match=r"returned 1 arrays, node writes 2"):
        execute(g, {"x": x}, opaque={"sorter": lambda a: a})
    with pytest.raises(ExecutionError, match=r"sorter.*raised ZeroDivisionError"):
        execute(g, {"x": x}, opaque={"sorter": lambda a: 1 / 0})


def test_input_errors():
    g = make({"M": 2, "N": 3, "K": 4}, {"A": ("M K", "input"), "B": ("K N", "weight"), "C": ("M N", "output")},
             MATMUL)
    with pytest.raises(ExecutionError, match=r"missing input array: B \(weight \[K, N\]\)"):
        execute(g, {"A": randn(2, 4)})
    with pytest.raises(ExecutionError, match=r"missing input arrays: A .*, B "):
        execute(g, {})
    with pytest.raises(ExecutionError, match=r"weight tensor B \[K, N\] must have shape \(4, 3\), got \(3, 4\)"):
        execute(g, {"A": randn(2, 4), "B": randn(3, 4)})
    with pytest.raises(ExecutionError, match="names no tensor"):
        execute(g, {"A": randn(2, 4), "B": randn(4, 3), "Z": randn(1)})
    with pytest.raises(ExecutionError, match="produced by node mm"):
        execute(g, {"A": randn(2, 4), "B": randn(4, 3), "C": randn(2, 3)})
    with pytest.raises(ValueError, match="outputs must be"):
        execute(g, {"A": randn(2, 4), "B": randn(4, 3)}, outputs="some")
    assert issubclass(ExecutionError, solar_io.SolarIOError)


def test_invalid_graph_is_refused():
    g = make({"M": 2, "N": 3, "K": 4}, {"A": ("M K", "input"), "B": ("K N", "weight"), "C": ("M N", "output")},
             MATMUL)
    bad = dataclasses.replace(g, nodes=(dataclasses.replace(g.nodes[0], reduce="none"),))
    with pytest.raises(solar_io.GraphError, match="reduce none, but ranks K are not in the output"):
        execute(bad, {"A": randn(2, 4), "B": randn(4, 3)})


# ----------------------------------------------------------------------------- chunking

def test_blocked_evaluation_matches_unblocked(monkeypatch: pytest.MonkeyPatch):
    """Tiny block limits force splitting of output and reduced ranks on every path."""
    g = make({"B": 5, "V": 37}, {**SOFTMAX_TENSORS, "i": ("B", "output", "int64"), "j": ("B", "output", "int64")},
             SOFTMAX_NODES + ARGMAX)
    x = np.round(randn(5, 37) * 2)  # many ties
    big = make({"M": 16, "N": 12, "K": 40}, {"A": ("M K", "input"), "B": ("K N", "weight"), "C": ("M N", "output")},
               MATMUL)
    a, b = randn(16, 40), randn(40, 12)
    conv = conv_graph(2, 3, 9, 4, 3, 2, 1, 1)
    xc, wc, bc = randn(2, 3, 9, 9), randn(4, 3, 3, 3), randn(4)
    want = execute(g, {"x": x}), execute(big, {"A": a, "B": b}), execute(conv, {"x": xc, "w": wc, "b": bc})
    monkeypatch.setattr(executor_module, "CHUNK_POINTS", 3)
    monkeypatch.setattr(executor_module, "CONTRACT_ELEMENTS", 5)
    got = execute(g, {"x": x}), execute(big, {"A": a, "B": b}), execute(conv, {"x": xc, "w": wc, "b": bc})
    for w, o in zip(want, got, strict=True):
        for name in w:
            close(o[name], w[name])
    np.testing.assert_array_equal(got[0]["i"], x.argmax(axis=1))
    np.testing.assert_array_equal(got[0]["j"], x.argmin(axis=1))


def test_huge_iteration_space_is_not_materialised():
    # 2^29 points (2 GiB as float32): reductions over two ranks no operand uses.
    g = make({"M": 8, "K": 1 << 13, "L": 1 << 13}, {"x": ("M", "input"), "y": ("M", "output"), "z": ("M", "output")},
             """
    - {name: mx, kind: einsum, op: max, space: [M, K, L], inputs: ["x[M]"], output: "y[M]", map: identity,
       reduce: max}
    - {name: dot, kind: einsum, op: sum, space: [M, K, L], inputs: ["x[M]", "x[M]"], output: "z[M]", map: mul,
       reduce: add}
    """)
    x = randn(8)
    out = execute(g, {"x": x})
    close(out["y"], x)
    close(out["z"], x * x * float(1 << 26), rtol=1e-5)


def test_large_matmul_goes_through_blas():
    g = make({"M": 1024, "N": 1024, "K": 1024},
             {"A": ("M K", "input"), "B": ("K N", "weight"), "C": ("M N", "output")}, MATMUL)
    a, b = randn(1024, 1024), randn(1024, 1024)
    close(execute(g, {"A": a, "B": b})["C"], a @ b, rtol=1e-3, atol=1e-3)


# ----------------------------------------------------------------------------- random affine einsums

SAFE_MAPS = {1: ["identity", "neg", "abs", "relu", "square"], 2: ["add", "sub", "mul", "mul", "max", "min"],
             3: ["add", "mul", "mul", "max", "min"]}


@st.composite
def affine_einsums(draw):
    """One einsum node with random affine accesses, padding and reduce, plus its input arrays."""
    space = [f"R{i}" for i in range(draw(st.integers(1, 4)))]
    sizes = {r: draw(st.integers(1, 4)) for r in space}
    n_in = draw(st.integers(1, 3))
    ranks, tensors, accesses, pads, arrays = dict(sizes), {}, [], {}, {}
    for i in range(n_in):
        exprs, dims = [], []
        for d in range(draw(st.integers(0, 3))):
            used = draw(st.lists(st.sampled_from(space), unique=True, max_size=2))
            terms = [(r, draw(st.sampled_from([-2, -1, 1, 1, 2]))) for r in used]
            const = draw(st.integers(-2, 2))
            lo = const + sum(min(0, c * (sizes[r] - 1)) for r, c in terms)
            hi = const + sum(max(0, c * (sizes[r] - 1)) for r, c in terms)
            extent = draw(st.integers(1, max(1, hi + 1)))
            plo, phi = max(0, -lo), max(0, hi - extent + 1)
            dim = f"D{i}_{d}"
            ranks[dim] = extent
            dims.append(dim)
            if plo or phi:
                pads[f"t{i}"] = {**pads.get(f"t{i}", {}), dim: [plo, phi]}
            text = " + ".join(f"{c}*{r}" for r, c in terms) or "0"
            exprs.append((text + f" + {const}").replace("+ -", "- "))
        tensors[f"t{i}"] = (" ".join(dims), "input")
        accesses.append(f"t{i}[{', '.join(exprs)}]")
        arrays[f"t{i}"] = np.round(RNG.standard_normal([ranks[d] for d in dims]).astype(np.float32) * 4) / 4
    reduce = draw(st.sampled_from(["none", "add", "max", "min", "mul", "argmax"]))
    if reduce == "none":
        out = list(space)
    elif reduce == "argmax":
        dropped = draw(st.sampled_from(space))
        out = [r for r in space if r != dropped]
    else:
        out = [r for r in space if draw(st.booleans())]
    # format 1.1: an inclusive scan along one output rank, after the reduction
    scan = draw(st.sampled_from(out)) if reduce in ("add", "max", "min", "mul") and out and draw(st.booleans()) \
        else None
    if reduce != "none" and len(out) == len(space) and scan is None:
        reduce = "none"
    out = draw(st.permutations(out))
    for r in out:
        ranks[f"O_{r}"] = sizes[r]
    tensors["y"] = (" ".join(f"O_{r}" for r in out), "output", "int64" if reduce == "argmax" else "fp32")
    fill = draw(st.sampled_from([None, -1.5]))
    node = {"name": "n", "kind": "einsum", "op": "random", "space": space, "inputs": accesses,
            "output": f"y[{', '.join(out)}]", "map": draw(st.sampled_from(SAFE_MAPS[n_in])), "reduce": reduce}
    if pads:
        node["pad"] = pads
    if fill is not None and pads:
        node["fill"] = fill
    if scan is not None:
        node["scan"] = scan
    text = "- {" + ", ".join(f"{k}: {v!r}" if isinstance(v, str) else f"{k}: {v}" for k, v in node.items()) + "}"
    return (make(ranks, tensors, text.replace("'", '"'), version="1.1" if scan else "1.0"), arrays,
            draw(st.sampled_from([None, 2, 7])))


def naive(g: solar_io.Graph, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The format's semantics, one iteration point at a time."""
    node = g.nodes[0]
    sizes = g.rank_sizes
    fill = np.float32(0.0 if node.fill is None else node.fill)
    fn = MAP_OPS[node.map].fn
    out_ranks = [e.terms[0][0] for e in node.outputs[0].index]
    reduced = [r for r in node.space if r not in out_ranks]
    acc: dict[tuple, object] = {}
    for point in itertools.product(*(range(sizes[r]) for r in node.space)):
        env = dict(zip(node.space, point, strict=True))
        vals = []
        for a in node.inputs:
            idx = [e.const + sum(c * env[r] for r, c in e.terms) for e in a.index]
            arr = arrays[a.tensor]
            inside = all(0 <= i < n for i, n in zip(idx, arr.shape, strict=True))
            vals.append(np.float32(arr[tuple(idx)]) if inside else fill)
        v = np.float32(fn(*vals))
        key = tuple(env[r] for r in out_ranks)
        if node.reduce == "argmax":
            pos = env[reduced[0]]
            if key not in acc or v > acc[key][0]:
                acc[key] = (v, pos)
        elif key not in acc or node.reduce == "none":
            acc[key] = v
        else:
            acc[key] = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[node.reduce](
                acc[key], v)
    shape = tuple(sizes[r] for r in out_ranks)
    res = np.zeros(shape, dtype=np.float64)
    for key, v in acc.items():
        res[key] = v[1] if node.reduce == "argmax" else v
    if node.scan is not None:
        op = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[node.reduce]
        res = scan_loop(res, op, out_ranks.index(node.scan))
    return res


@settings(max_examples=200, deadline=None)
@given(affine_einsums())
def test_random_affine_einsums_match_pointwise_semantics(case):
    g, arrays, chunk = case
    saved = executor_module.CHUNK_POINTS, executor_module.CONTRACT_ELEMENTS
    try:
        if chunk:
            executor_module.CHUNK_POINTS = executor_module.CONTRACT_ELEMENTS = chunk
        got = execute(g, arrays)["y"]
    finally:
        executor_module.CHUNK_POINTS, executor_module.CONTRACT_ELEMENTS = saved
    want = naive(g, arrays)
    if g.nodes[0].reduce == "argmax":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * max(1.0, math.prod(want.shape)))


@settings(max_examples=100, deadline=None)
@given(graphs(max_size=4))
def test_every_random_valid_graph_executes(g: solar_io.Graph):
    """Graphs of every node kind run; opaque nodes get implementations that return zeros."""
    feeds = {t.name: randn(*g.shape(t.name)) for t in g.tensors if t.role in ("input", "weight")}
    impls = {n.name: (lambda *xs, n=n: tuple(np.zeros(g.shape(a.tensor)) for a in n.outputs))
             for n in g.nodes if n.kind == "opaque"}
    with np.errstate(all="ignore"):  # log, sqrt, pow of random values
        out = execute(g, feeds, opaque=impls, outputs="all")
    assert set(out) == {t.name for t in g.tensors}
    for t in g.tensors:
        assert out[t.name].shape == g.shape(t.name) and out[t.name].dtype == numpy_dtype(t.dtype)


# ----------------------------------------------------------------------------- format 1.1: scans and scatters

def make11(ranks: dict[str, int], tensors: dict[str, tuple], nodes: str) -> solar_io.Graph:
    return make(ranks, tensors, nodes, version="1.1")


def scan_loop(x: np.ndarray, op, axis: int) -> np.ndarray:
    """Inclusive prefix of ``x`` along ``axis`` under ``op``, one element at a time."""
    out = np.array(x, dtype=np.float64)
    moved = np.moveaxis(out, axis, 0)
    for s in range(1, moved.shape[0]):
        moved[s] = op(moved[s - 1], moved[s])
    return out


@pytest.mark.parametrize("reduce, op", [("add", np.add), ("mul", np.multiply), ("max", np.maximum),
                                        ("min", np.minimum)])
def test_scan_along_a_middle_rank_is_the_inclusive_prefix(reduce: str, op):
    g = make11({"B": 2, "S": 7, "D": 3}, {"x": ("B S D", "input"), "y": ("B S D", "output")}, f"""
    - {{name: scan, kind: einsum, op: cum, space: [B, S, D], inputs: ["x[B, S, D]"], output: "y[B, S, D]",
       map: identity, reduce: {reduce}, scan: S}}
    """)
    x = RNG.uniform(0.5, 1.5, (2, 7, 3)).astype(np.float32)
    close(execute(g, {"x": x})["y"], scan_loop(x, op, 1), rtol=1e-5)
    m = solar_io.node_metrics(g, g.nodes[0])
    assert m.flops_vector == 2 * 3 * (7 - 1) and m.macs == 0  # a sequential scan: n - 1 combines per row


def test_scan_after_a_reduction_and_after_a_contraction():
    """Step 5 (reduce the ranks not in the output) comes first, then the prefix along the scan rank."""
    g = make11({"B": 2, "S": 6, "D": 4, "N": 3},
               {"x": ("B S D", "input"), "w": ("D N", "weight"), "r": ("B S", "output"), "c": ("B S N", "output"),
                "t": ("S B", "output")}, """
    - {name: rowcum, kind: einsum, op: hand, space: [B, S, D], inputs: ["x[B, S, D]"], output: "r[B, S]",
       map: exp, reduce: add, scan: S}
    - {name: mmcum, kind: einsum, op: hand, space: [B, S, N, D], inputs: ["x[B, S, D]", "w[D, N]"],
       output: "c[B, S, N]", map: mul, reduce: add, scan: S}
    - {name: transposed, kind: einsum, op: hand, space: [B, S], inputs: ["x[B, S, 0]"], output: "t[S, B]",
       map: identity, reduce: max, scan: S}
    """)
    x, w = randn(2, 6, 4), randn(4, 3)
    out = execute(g, {"x": x, "w": w})
    close(out["r"], np.cumsum(np.exp(x.astype(np.float64)).sum(2), 1))
    close(out["c"], np.cumsum(np.einsum("bsd,dn->bsn", x, w), 1))
    close(out["t"], np.maximum.accumulate(x[:, :, 0], 1).T)
    rowcum, mmcum, _ = (solar_io.node_metrics(g, n) for n in g.nodes)
    # points - output points (the sum over D) + (n_S - 1) per row (the scan): B*S*D - B*S + B*(S-1)
    assert rowcum.flops_vector == 2 * 6 * 4 - 2 * 6 + 2 * 5 and rowcum.transcendental == 2 * 6 * 4
    assert mmcum.macs == 2 * 6 * 3 * 4 and mmcum.flops_vector == 2 * 3 * 5


SCATTER_TENSORS = {"table": ("V D", "input"), "src": ("I D", "input"), "idx": ("I", "input", "int64"),
                   "out": ("V D", "output")}


def scatter_graph(reduce: str, map_: str = "identity") -> solar_io.Graph:
    return make11({"V": 6, "D": 3, "I": 5}, SCATTER_TENSORS, f"""
    - {{name: scatter, kind: einsum, op: aten.index_add, space: [I, D],
       inputs: ["table[@idx, D]", "src[I, D]", "idx[I]"], output: "out[@idx, D]", init: table,
       map: {map_}, reduce: {reduce}}}
    """)


@pytest.mark.parametrize("reduce, op", [("add", np.add), ("mul", np.multiply), ("max", np.maximum),
                                        ("min", np.minimum)])
def test_scatter_combines_every_point_into_the_init_values(reduce: str, op):
    table, src = randn(6, 3), randn(5, 3)
    idx = np.array([4, 1, 4, 4, 0])  # repeated indexes all count
    want = table.astype(np.float64)
    for i in range(5):
        want[idx[i]] = op(want[idx[i]], src[i])
    close(execute(scatter_graph(reduce), {"table": table, "src": src, "idx": idx})["out"], want)


def test_scatter_none_overwrites_the_selected_elements():
    table, src = randn(6, 3), randn(5, 3)
    idx = np.array([5, 2, 0, 3, 1])  # distinct: the result is defined
    want = table.copy()
    for i in range(5):
        want[idx[i]] = np.negative(src[i])
    close(execute(scatter_graph("none", "neg"), {"table": table, "src": src, "idx": idx})["out"], want)


def test_scatter_through_two_index_tensors_and_a_zero_init():
    """index_put((rows, cols), vals, accumulate=True) into zeros: the init is an immediate."""
    g = make11({"R": 4, "C": 5, "K": 6},
               {"zeros": ("R C", "constant", "fp32", 0.0), "vals": ("K", "input"), "rows": ("K", "input", "int32"),
                "cols": ("K", "input", "int32"), "y": ("R C", "output")}, """
    - {name: put, kind: einsum, op: aten.index_put, space: [K], inputs: ["zeros[@rows, @cols]", "vals[K]", "rows[K]",
       "cols[K]"], output: "y[@rows, @cols]", init: zeros, map: identity, reduce: add}
    """)
    vals, rows, cols = randn(6), np.array([0, 3, 3, 1, 0, 3]), np.array([4, 2, 2, 0, 4, 1])
    want = np.zeros((4, 5))
    for k in range(6):
        want[rows[k], cols[k]] += vals[k]
    close(execute(g, {"vals": vals, "rows": rows, "cols": cols})["y"], want)
    m = solar_io.node_metrics(g, g.nodes[0])
    assert m.bytes_read == {"zeros": 0.0, "vals": 24.0, "rows": 24.0, "cols": 24.0}
    assert m.bytes_written == {"y": 20 * 4.0}  # a new output: all 20 elements, the zeros too
    assert m.flops_vector == 6 and m.macs == 0


def test_scatter_bytes_count_the_selected_rows_like_a_gather():
    """In place (the output ``updates`` the table, 1.5) a scatter moves the selected rows only; into a new
    output it writes all 6 rows and reads the table where it does not overwrite (all of it to combine)."""
    def in_place(g: solar_io.Graph) -> solar_io.Graph:
        return dataclasses.replace(g, version="1.5", tensors=tuple(
            dataclasses.replace(t, updates="table") if t.name == "out" else t for t in g.tensors))

    add, put = (solar_io.node_metrics(g, g.nodes[0]) for g in (in_place(scatter_graph("add")),
                                                                 in_place(scatter_graph("none"))))
    rows = min(6, 5) * 3 * 4.0  # 5 index values, taken as distinct, of 6 rows; D = 3; fp32
    assert add.bytes_written == put.bytes_written == {"out": rows}
    assert add.bytes_read == {"table": rows, "src": 5 * 3 * 4.0, "idx": 5 * 8.0}  # read-modify-write
    assert put.bytes_read["table"] == 0.0  # an overwrite reads nothing of the init
    assert add.flops_vector == 5 * 3 and put.flops_vector == 0
    add, put = (solar_io.node_metrics(g, g.nodes[0]) for g in (scatter_graph("add"), scatter_graph("none")))
    assert add.bytes_written == put.bytes_written == {"out": 6 * 3 * 4.0}
    assert add.bytes_read["table"] == 6 * 3 * 4.0 and put.bytes_read["table"] == 6 * 3 * 4.0 - rows


def test_a_gather_reads_at_most_one_element_per_point():
    """torch.gather along dim 0: out[i, j] = x[idx[i, j], j] reads at most I*J elements of x, not I*J rows."""
    g = make({"N": 100, "J": 4, "I": 3}, {"x": ("N J", "input"), "idx": ("I J", "input", "int64"),
                                          "y": ("I J", "output")}, """
    - {name: gather, kind: data_movement, op: aten.gather, movement: copy, space: [I, J],
       inputs: ["x[@idx, J]", "idx[I, J]"], output: "y[I, J]"}
    """)
    assert solar_io.node_metrics(g, g.nodes[0]).bytes_read["x"] == 3 * 4 * 4.0


def test_scatter_index_outside_the_output_is_an_error():
    with pytest.raises(ExecutionError, match="index tensor idx holds values in \\[0, 6\\], outside \\[0, 5\\]"):
        execute(scatter_graph("add"), {"table": randn(6, 3), "src": randn(5, 3), "idx": np.array([0, 6, 1, 1, 1])})


@pytest.mark.parametrize("change, message", [
    (("init: table, ", ""), "needs init"),
    (('"table[@idx, D]", ', '"table[I, D]", '), "must be read exactly once, with the output's index"),
    (("reduce: add", "reduce: argmax"), "a scatter combines with reduce none, add, mul, max or min"),
    (("reduce: add", "reduce: add, scan: D"), "a scan cannot write through an @ index"),
    (('output: "out[@idx, D]"', 'output: "out[@src, D]"'), "index tensor src must have an integer dtype"),
])
def test_invalid_scatters_are_refused(change: tuple[str, str], message: str):
    text = solar_io.dumps(scatter_graph("add"))
    node = ("- {name: scatter, kind: einsum, op: aten.index_add, space: [I, D], inputs: [\"table[@idx, D]\", "
            "\"src[I, D]\", \"idx[I]\"], output: \"out[@idx, D]\", init: table, map: identity, reduce: add}")
    bad = node.replace(*change)
    doc_nodes = text[text.index("nodes:"):text.index("validation:")]
    with pytest.raises(solar_io.GraphError) as e:
        loads(text.replace(doc_nodes, "nodes:\n" + bad + "\n"))
    assert any(message in line for line in e.value.lines()), e.value.lines()


@pytest.mark.parametrize("node, message", [
    ('output: "y[B, S]", map: identity, reduce: add, scan: D', "scan rank D must be a rank of the space that indexes"),
    ('output: "y[B, S]", map: identity, reduce: none, scan: S', "reduce add, mul, max or min, got none"),
    ('output: "y[B, S]", map: identity, reduce: add, init: x', "init is only for outputs written through an @"),
])
def test_invalid_scans_are_refused(node: str, message: str):
    with pytest.raises(solar_io.GraphError) as e:
        make11({"B": 2, "S": 3, "D": 4}, {"x": ("B S D", "input"), "y": ("B S", "output")},
               f'- {{name: n, kind: einsum, op: o, space: [B, S, D], inputs: ["x[B, S, D]"], {node}}}')
    assert any(message in line for line in e.value.lines()), e.value.lines()


def test_new_map_ops_against_the_math_module():
    """Every 1.1 map operator against Python's math module, point by point."""
    x = np.linspace(-0.95, 0.95, 9)
    y = np.linspace(0.3, 2.7, 9)
    refs = {"tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan, "sinh": math.sinh,
            "cosh": math.cosh, "asinh": math.asinh, "atanh": math.atanh, "erfc": math.erfc,
            "log1p": math.log1p, "expm1": math.expm1, "exp2": lambda v: 2.0 ** v, "trunc": math.trunc}
    for name, f in refs.items():
        close(MAP_OPS[name].fn(x), [f(v) for v in x], rtol=1e-6, atol=1e-7)
    for name, f in {"acosh": math.acosh, "log2": math.log2, "log10": math.log10}.items():
        close(MAP_OPS[name].fn(y + 1.0), [f(v + 1.0) for v in y], rtol=1e-6, atol=0)
    close(MAP_OPS["atan2"].fn(x, -y), [math.atan2(a, -b) for a, b in zip(x, y, strict=True)], rtol=1e-6)
    close(MAP_OPS["fmod"].fn(5 * x, y), [math.fmod(5 * a, b) for a, b in zip(x, y, strict=True)], atol=1e-6)
    close(MAP_OPS["remainder"].fn(5 * x, -y), [(5 * a) % -b for a, b in zip(x, y, strict=True)], atol=1e-6)
    z = np.concatenate([np.linspace(-0.999999, 0.999999, 41), [-1.0, 1.0, 1.5]])
    inv = MAP_OPS["erfinv"].fn(z)
    close([math.erf(v) for v in inv[:41]], z[:41], rtol=1e-6, atol=1e-7)
    assert inv[41] == -np.inf and inv[42] == np.inf and np.isnan(inv[43])
    big = np.array([-3.0, 4.0, 6.0])
    close(MAP_OPS["erfc"].fn(big), [math.erfc(v) for v in big], rtol=1e-6, atol=0)  # no cancellation
    for name in refs:
        assert (MAP_OPS[name].vector, MAP_OPS[name].transcendental) in ((0, 1), (1, 0))
