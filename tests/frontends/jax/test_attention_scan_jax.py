"""JAX attention inside ``lax.scan`` bodies (issue 22): a scanned layer stack's attention is fused like a
top-level one (frontends/jax/attention.py rewrites the scan's body); the training step of a 2-layer scanned
stack validates, its MACs equal jax's own count of the math step (scan bodies counted once per step, less the
first layer's dead input gradients), the
causal work is the triangle, and no [B, H, S, T] tensor crosses memory."""

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

L, B, S, H, E, D = 2, 2, 10, 4, 8, 32

STACK = """
import jax
import jax.numpy as jnp
import numpy as np
L, B, S, H, E, D = 2, 2, 10, 4, 8, 32
def get_params():
    r = np.random.default_rng(0)
    return {n: jnp.asarray(r.standard_normal((L, D, D)) * 0.2, jnp.float32) for n in "qkvo"}
def model(p, x):
    def layer(h, w):
        q, k, v = ((h @ w[n]).reshape(B, S, H, E) for n in "qkv")
        o = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        return h + o.reshape(B, S, D) @ w["o"], None
    return jax.lax.scan(layer, x, p)[0]
def get_inputs():
    return [jnp.asarray(np.random.default_rng(1).standard_normal((B, S, D)), jnp.float32)]
"""


def _dot_macs(jaxpr, times: int = 1) -> int:  # noqa: ANN001
    """MACs of every dot_general in a jaxpr, a scan's body counted once per step: jax's own count."""
    total = 0
    for e in jaxpr.eqns:
        if e.primitive.name == "dot_general":
            (lc, _), _ = e.params["dimension_numbers"]
            total += times * int(np.prod(e.outvars[0].aval.shape)) * int(
                np.prod([e.invars[0].aval.shape[i] for i in lc]))
        steps = int(e.params["length"]) if e.primitive.name == "scan" else 1
        for p in e.params.values():
            sub = getattr(p, "jaxpr", None)
            if sub is not None:
                total += _dot_macs(sub, times * steps)
    return total


@pytest.mark.parametrize("mask", ["is_causal=True", "local_window_size=(3, 0)"])
def test_scanned_stack_step_is_fused(tmp_path: Path, mask: str) -> None:
    # causal (iota) and a sliding window (jnp.array(range(T)): constants of the scan's body)
    src = tmp_path / "stack.py"
    src.write_text(STACK.replace("is_causal=True", mask))
    g = capture_train_file(src, TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    assert not [n for n in g.nodes if n.kind == "opaque"]
    values = dict(next(a for a in g.assumptions if a.subject == "attention").values)
    assert values["fused_attention_calls"] == L
    kernels = {n.kernel for n in g.nodes if (n.kernel or "").startswith("fused_attention")}
    assert sum(k.startswith("fused_attention_forward") for k in kernels) == L
    assert sum(k.startswith("fused_attention_backward") for k in kernels) == L
    # MACs: jax's own autodiff of the same (unfused) scanned step, every step of each scan counted
    prog = load_program(src)
    step = jax.make_jaxpr(step_function(prog, "sum"))(prog.abstract_params, *prog.abstract_inputs)
    gm = graph_metrics(g)
    dots = sum(m.macs for n, m in zip(g.nodes, gm.nodes, strict=True) if n.op == "jax.dot_general")
    proj, att = B * S * D * D, B * H * S * S * E
    # by hand, per layer: 4 projections forward, 4 weight and 4 input gradients, attention QK^T, PV forward and
    # dP, dV, dQ, dK backward (the recomputed QK^T uncharged); jax's rolled scan also runs the first layer's three
    # input gradients of x (an input: nobody reads them), which the unrolled graph drops as dead work
    assert _dot_macs(step.jaxpr) == L * (12 * proj + 6 * att)
    assert dots == _dot_macs(step.jaxpr) - 3 * proj
    # the kept positions (the causal triangle; the window's diagonal and 3 keys before it, counted by brute force)
    # in each of the six charged score contractions of each layer
    rows = bound(g, "h100-sxm").nodes
    fused = [n for n in rows if (g.node_map[n.name].kernel or "").startswith("fused_attention")
             and g.node_map[n.name].op == "jax.dot_general"]
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    kept = (j <= i) & (j >= i - 3) if "window" in mask else j <= i
    assert values["mask_values"] == ("known",) * 2 * L
    tri = B * H * int(kept.sum()) * E
    assert sum(n.macs * n.effectual_fraction for n in fused) == pytest.approx(L * 6 * tri)
    # no [B, H, S, T] scores or probabilities cross memory in the unfused bound
    gt = traffic_of(g)
    groups = kernel_groups(g, spans=gt.spans)
    crossing = {t for k in kernel_traffic(g, gt.nodes, groups, gt.exposed)
                for t, n in (*k.reads.items(), *k.writes.items()) if n > 0}
    assert crossing and not [t for t in crossing if list(g.shape(t)).count(S) >= 2]


def test_flax_nn_scan_attention_is_fused() -> None:
    # Flax's nn.scan over a self-attention block: one region in the body, run once per layer (two layers)
    nn = pytest.importorskip("flax.linen")

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            return x + nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8)(x), None

    stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=2)()
    x = jnp.asarray(np.random.default_rng(0).standard_normal((1, 4, 8)), jnp.float32)
    shapes = jax.eval_shape(stack.init, jax.random.PRNGKey(0), x, None)  # (init's RNG is slow to compile)
    r = np.random.default_rng(1)
    params = jax.tree_util.tree_map(lambda t: jnp.asarray(r.standard_normal(t.shape) * 0.3, t.dtype), shapes)

    def f(p, x):  # noqa: ANN001, ANN202
        return stack.apply(p, x, None)[0]

    fn, n = fuse_attention(f, (params, x))
    assert n == 2
    assert np.allclose(jax.jit(fn)(params, x), jax.jit(f)(params, x), atol=1e-5)
    grad = lambda g: jax.jit(jax.grad(lambda p: (g(p, x) ** 2).sum()))(params)  # noqa: E731
    got, want = jax.tree_util.tree_leaves(grad(fn)), jax.tree_util.tree_leaves(grad(f))
    assert all(np.allclose(a, b, atol=1e-4, rtol=1e-4) for a, b in zip(got, want, strict=True))


def test_checkpointed_scanned_stack_is_fused(tmp_path: Path) -> None:
    # jax.checkpoint around the scanned layer (remat2, Flax nn.remat): fused inside the checkpoint; the backward
    # scan recomputes each layer's forward, so each layer has two fused forwards and one fused backward
    src = tmp_path / "remat.py"
    src.write_text(STACK.replace("    def layer(h, w):", "    @jax.checkpoint\n    def layer(h, w):"))
    g = capture_train_file(src, TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    assert dict(next(a for a in g.assumptions if a.subject == "attention").values)["fused_attention_calls"] == L
    kernels = {n.kernel for n in g.nodes if (n.kernel or "").startswith("fused_attention")}
    assert sum(k.startswith("fused_attention_forward") for k in kernels) == 2 * L
    assert sum(k.startswith("fused_attention_backward") for k in kernels) == L
    gt = traffic_of(g)
    groups = kernel_groups(g, spans=gt.spans)
    crossing = {t for k in kernel_traffic(g, gt.nodes, groups, gt.exposed)
                for t, n in (*k.reads.items(), *k.writes.items()) if n > 0}
    assert crossing and not [t for t in crossing if list(g.shape(t)).count(S) >= 2]


def test_a_scan_too_long_to_unroll_is_opaque_validated_and_not_counted_as_fused(tmp_path: Path) -> None:
    # 257 layers (one more step than the frontend unrolls): the forward and backward scans stay opaque
    # nodes, the step still validates (each opaque node runs jax's own scan, only the outputs the graph
    # kept), and the assumption says the 257 calls are inside them, none lowered as a fused kernel.
    src = tmp_path / "long.py"
    src.write_text(STACK.replace("L, B, S, H, E, D = 2, 2, 10, 4, 8, 32", "L, B, S, H, E, D = 257, 1, 4, 1, 4, 4"))
    g = capture_train_file(src, TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    assert [n.op for n in g.nodes if n.kind == "opaque"] == ["jax.scan", "jax.scan"]
    values = dict(next(a for a in g.assumptions if a.subject == "attention").values)
    assert values["fused_attention_calls"] == 0 and values["calls_in_opaque_nodes"] == 257
    assert not [n for n in g.nodes if (n.kernel or "").startswith("fused_attention")]
