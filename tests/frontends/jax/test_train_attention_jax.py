"""JAX training attention (issue 22): the math path (jax.nn.dot_product_attention, softmax(QK^T)V by hand)
is captured as a fused forward and a fused backward with recomputed scores (frontends/jax/attention.py):
MACs by hand and against jax's own backward (the recomputation uncharged), causal work the triangle, each
kernel's bytes by hand, no S x T tensor in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

from solar_io import bound  # noqa: E402
from solar_io.backends.traffic.graph import traffic_of  # noqa: E402
from solar_io.backends.traffic.kernels import kernel_groups, kernel_traffic  # noqa: E402
from solar_io.frontends.common.training import TrainSpec  # noqa: E402
from solar_io.frontends.jax.attention import fuse_attention  # noqa: E402
from solar_io.frontends.jax.capture import load_program  # noqa: E402
from solar_io.frontends.jax.train import capture_train_file, step_function  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

B, S, H, E, D = 2, 10, 4, 8, 32

MODEL = """
import jax
import jax.numpy as jnp
import numpy as np
B, S, H, E, D = 2, 10, 4, 8, 32
KIND = "explicit"
def get_params():
    r = np.random.default_rng(0)
    f = lambda *s: jnp.asarray(r.standard_normal(s) * 0.2, jnp.float32)
    p = {"q": f(D, D), "k": f(D, D), "v": f(D, D), "o": f(D, D)}
    if KIND == "bias":
        p["bias"] = f(H, S, S)
    return p
def model(p, x):
    q, k, v = ((x @ p[n]).reshape(B, S, H, E) for n in "qkv")
    if KIND == "causal":
        o = jax.nn.dot_product_attention(q, k, v, is_causal=True)
    elif KIND == "bias":
        o = jax.nn.dot_product_attention(q, k, v, bias=p["bias"][None])
    else:
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(E)
        o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)
    return o.reshape(B, S, D) @ p["o"]
def get_inputs():
    return [jnp.asarray(np.random.default_rng(1).standard_normal((B, S, D)), jnp.float32)]
"""


def _kernels(g) -> dict[str, tuple[dict[str, float], dict[str, float]]]:  # noqa: ANN001
    """{kernel id: (bytes read by root, bytes written)} of the unfused bound's kernels."""
    gt = traffic_of(g)
    groups = kernel_groups(g, spans=gt.spans)
    return {g.nodes[k[0]].kernel or g.nodes[k[0]].name: (dict(t.reads), dict(t.writes))
            for k, t in zip(groups, kernel_traffic(g, gt.nodes, groups, gt.exposed), strict=True)}


def _dot_macs(closed) -> int:  # noqa: ANN001
    """MACs of every dot_general in a jaxpr (sub-jaxprs included): jax's own count of its program."""
    total = 0
    for e in closed.eqns:
        if e.primitive.name == "dot_general":
            (lc, _), _ = e.params["dimension_numbers"]
            total += int(np.prod(e.outvars[0].aval.shape)) * int(np.prod([e.invars[0].aval.shape[i] for i in lc]))
        for p in e.params.values():
            sub = getattr(p, "jaxpr", None)
            if sub is not None:
                total += _dot_macs(sub)
    return total


@pytest.mark.parametrize("kind", ["explicit", "causal", "bias"])
def test_attention_step_is_fused(tmp_path: Path, kind: str) -> None:
    src = tmp_path / "attn.py"
    src.write_text(MODEL.replace('KIND = "explicit"', f'KIND = "{kind}"'))
    g = capture_train_file(src, TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason  # against jax.jit of the user's math step
    assert not [n for n in g.nodes if n.kind == "opaque"]
    assert dict(next(a for a in g.assumptions if a.subject == "attention").values)["fused_attention_calls"] == 1
    # MACs by hand: four projections forward; backward their weight gradients and the out projection's input
    # gradient (x needs none); attention forward QK^T and PV, backward dP, dV, dQ, dK: the backward's recomputed
    # QK^T is uncharged (JAX's own run keeps the probabilities), the file lists it
    proj, att = B * S * D * D, B * H * S * S * E
    gm = graph_metrics(g)
    assert gm.macs == 4 * proj + 5 * proj + 2 * att + 4 * att
    # against jax's own autodiff of the same step (math path, no recomputation): the same MACs
    prog = load_program(src)
    step = jax.make_jaxpr(step_function(prog, "sum"))(prog.abstract_params, *prog.abstract_inputs)
    assert gm.macs == _dot_macs(step.jaxpr)
    free = dict(next(a for a in g.assumptions if a.subject == "attention").values)["uncharged_work"]
    recompute = [n for n in g.nodes if n.name in free and n.kind == "einsum" and n.reduce == "add"]
    # one contraction uncharged, of the scores' B H S T E points: the recomputed QK^T; its bytes still counted
    assert [(gm.nodes[g.nodes.index(n)].points, gm.nodes[g.nodes.index(n)].macs) for n in recompute] == [(att, 0)]
    assert all(gm.nodes[g.nodes.index(n)].bytes > 0 for n in recompute)
    assert all(n.kernel.startswith("fused_attention_backward") for n in g.nodes if n.name in free)
    # the bound's work: a causal kernel computes the triangle only, S (S + 1) / 2 of the S x S positions per
    # head (by hand), in each of its six charged score contractions; a learned bias has unknown values (it could
    # hide all but one key per query row, common/masks.py): one key per row; every other contraction whole
    rows = bound(g, "h100-sxm").nodes
    tri = {"causal": B * H * (S * (S + 1) // 2) * E, "bias": B * H * S * E}.get(kind, att)
    dots = [n for n in rows if g.node_map[n.name].op == "jax.dot_general"]
    assert sum(n.macs * n.effectual_fraction for n in dots) == pytest.approx(9 * proj + 6 * tri)
    masked = dict(next(a for a in g.assumptions if a.subject == "attention").values).get("kept_fraction")
    assert masked == {"causal": (S * (S + 1) / 2 / S**2,) * 2, "bias": (1 / S,) * 2}.get(kind)
    kb = _kernels(g)
    (fwd,) = [v for k, v in kb.items() if k.startswith("fused_attention_forward")]
    (bwd,) = [v for k, v in kb.items() if k.startswith("fused_attention_backward")]
    q = k = v = o = d_o = B * S * D * 4
    lse = B * H * S * 4
    bias = H * S * S * 4 if kind == "bias" else 0  # the learned bias [H, S, T] read once per kernel
    assert sum(fwd[0].values()) == q + k + v + bias and sum(fwd[1].values()) == o + lse
    assert sum(bwd[0].values()) == q + k + v + lse + d_o + bias
    assert sum(bwd[1].values()) == q + k + v + bias  # dQ, dK, dV and the bias gradient summed over B
    crossing = {t for r, w in kb.values() for t, b in (*r.items(), *w.items()) if b > 0}
    square = [t for t in crossing if list(g.shape(t)).count(S) >= 2]  # [.., S, T] (no other dim is 10)
    # no [B, H, S, T] probabilities, scores or mask in memory: only the learned bias [H, S, T] and its gradient
    # (the kernel's, then jax's transpose of the bias's [None] broadcast: a sum over a size-1 axis)
    assert sorted(int(np.prod(g.shape(t))) for t in square) == ([H * S * S] * 3 if kind == "bias" else [])
    assert "bias" in square or kind != "bias"


def test_unmatched_attention_stays_on_the_math_path() -> None:
    # the probabilities are also returned: a fused kernel never writes them, so the region is left as it is
    def weights_too(q, k, v):  # noqa: ANN001, ANN202
        p = jax.nn.softmax(q @ k.T, axis=-1)
        return p @ v, p

    def over_queries(q, k, v):  # noqa: ANN001, ANN202
        return jax.nn.softmax(q @ k.T, axis=0) @ v  # the softmax is not over the contracted axis

    x = jnp.ones((8, 16))
    assert fuse_attention(weights_too, (x, x, x))[1] == 0
    assert fuse_attention(over_queries, (x, x, x))[1] == 0
    fn, n = fuse_attention(lambda q, k, v: jax.nn.dot_product_attention(q, k, v), (jnp.ones((1, 8, 2, 16)),) * 3)
    r = np.random.default_rng(0)
    args = [jnp.asarray(r.standard_normal((1, 8, 2, 16)), jnp.float32) for _ in range(3)]
    loss = lambda f: lambda *a: f(*a).sum() ** 2  # noqa: E731
    assert n == 1 and np.allclose(fn(*args), jax.nn.dot_product_attention(*args), atol=1e-5)
    got = jax.grad(loss(fn), argnums=(0, 1, 2))(*args)
    want = jax.grad(loss(jax.nn.dot_product_attention), argnums=(0, 1, 2))(*args)
    assert all(np.allclose(a, b, atol=1e-4) for a, b in zip(got, want, strict=True))


def test_flax_bf16_attention_is_fused():
    # Flax's MultiHeadDotProductAttention in bf16 sums its softmax's exponentials in fp32 (casts between):
    # still one region; values and gradients agree with the math path to bf16 precision
    nn = pytest.importorskip("flax.linen")
    m = nn.MultiHeadDotProductAttention(num_heads=4, qkv_features=32, dtype=jnp.bfloat16)
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, 12, 32)), jnp.float32)
    params = m.init(jax.random.PRNGKey(0), x, x)

    def f(p, x):  # noqa: ANN001, ANN202
        return m.apply(p, x, x)

    fn, n = fuse_attention(f, (params, x))
    assert n == 1
    assert np.allclose(np.asarray(fn(params, x), np.float32), np.asarray(f(params, x), np.float32), atol=3e-2)
    grad = lambda g: jax.grad(lambda p: (g(p, x).astype(jnp.float32) ** 2).sum())(params)  # noqa: E731
    got, want = jax.tree_util.tree_leaves(grad(fn)), jax.tree_util.tree_leaves(grad(f))
    assert all(np.allclose(a, b, atol=0.1, rtol=0.05) for a, b in zip(got, want, strict=True))


def test_kept_positions_of_index_masks() -> None:
    # kept score positions by hand: causal S = T = 6 keeps 21 of 36 per head; a sliding window of 2 from
    # jnp.arange keeps the diagonal and the one before (6 + 5); a user's boolean mask has unknown values: one key
    # per query row (6 of 36 per head)
    from solar_io.frontends.jax.attention import kept_positions
    from solar_io.frontends.jax.attention_match import find_regions

    x, m = jnp.ones((1, 6, 2, 4)), jnp.ones((1, 2, 6, 6), bool)

    def kept(f, *args):  # noqa: ANN001, ANN002, ANN202
        closed = jax.make_jaxpr(f)(*args)
        (r,) = find_regions(closed.jaxpr, closed.consts).values()
        m = kept_positions(r)
        return m if m is None else (m.kept, m.total)

    att = jax.nn.dot_product_attention
    assert kept(lambda q, k, v: att(q, k, v, is_causal=True), x, x, x) == (2 * 21, 2 * 36)

    def window(q, k, v):  # noqa: ANN001, ANN202
        i, j = jnp.arange(6)[:, None], jnp.arange(6)[None, :]
        s = jnp.where((j <= i) & (j >= i - 1), jnp.einsum("qhd,khd->hqk", q, k), -jnp.inf)
        return jnp.einsum("hqk,khd->qhd", jax.nn.softmax(s, axis=-1), v)

    assert kept(window, x[0], x[0], x[0]) == (2 * 11, 2 * 36)
    assert kept(lambda q, k, v, m: att(q, k, v, mask=m), x, x, x, m) == (2 * 6, 2 * 36)


def test_constant_cotangent_keeps_the_backward_charged(tmp_path: Path) -> None:
    # the loss sums the attention output itself: its cotangent is a constant of ones; still only the recomputed
    # scores go uncharged (MACs = jax's own math step: 3 projections, their 3 weight gradients, 6 attention)
    src = tmp_path / "direct.py"
    src.write_text(MODEL.replace("    return o.reshape(B, S, D) @ p[\"o\"]", "    return o")
                   .replace('KIND = "explicit"', 'KIND = "causal"').replace(', "o": f(D, D)', ""))
    g = capture_train_file(src, TrainSpec(optimizer="none"), validate=False)
    prog = load_program(src)
    step = jax.make_jaxpr(step_function(prog, "sum"))(prog.abstract_params, *prog.abstract_inputs)
    assert graph_metrics(g).macs == _dot_macs(step.jaxpr) == 6 * B * S * D * D + 6 * B * H * S * S * E
