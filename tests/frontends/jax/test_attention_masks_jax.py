"""JAX fused attention with masks (issue 22): the share of score positions a mask keeps, counted by brute force
(numpy over the same mask), for causal combined with a user's mask, sliding windows (local_window_size: numpy
constants), a numpy block mask, a bias proven finite and a learned bias; a training step with such a mask is
validated and its score contractions' work is the kept share."""

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
from solar_io.frontends.jax.attention import kept_positions  # noqa: E402
from solar_io.frontends.jax.attention_match import find_regions  # noqa: E402
from solar_io.frontends.jax.train import capture_train_file  # noqa: E402

S, H, E = 7, 2, 4
att = jax.nn.dot_product_attention
X = jnp.ones((1, S, H, E))


def _kept(f, *args):  # noqa: ANN001, ANN002, ANN202
    closed = jax.make_jaxpr(f)(*args)
    (r,) = find_regions(closed.jaxpr, closed.consts).values()
    return kept_positions(r)


def _window(left: int, right: int) -> np.ndarray:
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    return (j >= i - left) & (j <= i + right)


def test_window_and_constant_masks_counted_from_their_values() -> None:
    # local_window_size builds its mask from jnp.array(range(T)) (constants of the program): counted exactly
    for left, right in [(2, 0), (1, 3), (0, 0)]:
        m = _kept(lambda q, k, v, w=(left, right): att(q, k, v, local_window_size=w), X, X, X)
        assert (m.kept, m.total, m.known) == (H * int(_window(left, right).sum()), H * S * S, True)
    # a window combined with causal: the window's lower part only
    m = _kept(lambda q, k, v: att(q, k, v, is_causal=True, local_window_size=(2, 2)), X, X, X)
    assert m.kept == H * int((_window(2, 2) & np.tril(np.ones((S, S), bool))).sum())
    # a numpy block mask closed over (a constant of the program), with causal: the brute-force AND
    block = np.random.default_rng(3).random((S, S)) < 0.5
    block[np.arange(S), np.arange(S)] = True  # every row keeps its diagonal
    m = _kept(lambda q, k, v: att(q, k, v, mask=jnp.asarray(block)[None, None], is_causal=True), X, X, X)
    assert (m.kept, m.known) == (H * int((block & np.tril(np.ones((S, S), bool))).sum()), True)


def test_masks_of_unknown_values_keep_one_key_per_row() -> None:
    # a user's mask (an input), alone or with causal: any mask with a defined softmax keeps one key per query row
    mask = jnp.ones((1, H, S, S), bool)
    for causal in (False, True):
        m = _kept(lambda q, k, v, mk, c=causal: att(q, k, v, mask=mk, is_causal=c), X, X, X, mask)
        assert (m.kept, m.total, m.known) == (H * S, H * S * S, False)
    # padding by sequence lengths (an input vector): the same least
    m = _kept(lambda q, k, v, n: att(q, k, v, key_value_seq_lengths=n), X, X, X, jnp.array([3], jnp.int32))
    assert (m.kept, m.known) == (H * S, False)
    # a learned additive bias of unknown range could hide all but one key: one key per row
    bias = jnp.ones((1, H, S, S))
    assert _kept(lambda q, k, v, b: att(q, k, v, bias=b), X, X, X, bias).kept == H * S
    # a bias proven finite by its construction (a boolean input times -2): hides nothing, every position counts
    assert _kept(lambda q, k, v, mk: att(q, k, v, bias=mk.astype(jnp.float32) * -2.0), X, X, X, mask) is None
    # the same bias with causal: the triangle, from the indices
    m = _kept(lambda q, k, v, mk: att(q, k, v, bias=mk.astype(jnp.float32) * -2.0, is_causal=True), X, X, X, mask)
    assert (m.kept, m.known) == (H * S * (S + 1) // 2, False)


MODEL = """
import jax
import jax.numpy as jnp
import numpy as np
B, S, H, E, D = 2, 10, 4, 8, 32
def get_params():
    r = np.random.default_rng(0)
    f = lambda *s: jnp.asarray(r.standard_normal(s) * 0.2, jnp.float32)
    return {"q": f(D, D), "k": f(D, D), "v": f(D, D), "o": f(D, D)}
def model(p, x, m):
    q, k, v = ((x @ p[n]).reshape(B, S, H, E) for n in "qkv")
    o = jax.nn.dot_product_attention(q, k, v, KWARGS)
    return o.reshape(B, S, D) @ p["o"]
def get_inputs():
    r = np.random.default_rng(1)
    m = r.random((B, 1, S, S)) < 0.6
    m[:, :, np.arange(S), np.arange(S)] = True
    return [jnp.asarray(r.standard_normal((B, S, D)), jnp.float32), jnp.asarray(m)]
"""


@pytest.mark.parametrize("kwargs, kept", [
    ("local_window_size=(3, 0)", lambda b, s: b * int(_window_n(s, 3, 0).sum())),
    ("mask=m, is_causal=True", lambda b, s: b * s),
])
def test_masked_step_prices_the_kept_share(tmp_path: Path, kwargs: str, kept) -> None:  # noqa: ANN001
    b, s, h, e = 2, 10, 4, 8
    src = tmp_path / "masked.py"
    src.write_text(MODEL.replace("KWARGS", kwargs))
    g = capture_train_file(src, TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    values = dict(next(a for a in g.assumptions if a.subject == "attention").values)
    per_head = kept(1, s)
    assert values["kept_fraction"] == (per_head / s**2,) * 2
    assert values["mask_values"] == ("known",) * 2 if "window" in kwargs else ("unknown: least kept",) * 2
    # the six charged score contractions (forward QK^T, PV; backward dP, dV, dQ, dK) at the kept positions
    rows = bound(g, "h100-sxm").nodes
    fused = [n for n in rows if (g.node_map[n.name].kernel or "").startswith("fused_attention")
             and g.node_map[n.name].op == "jax.dot_general" and n.macs]
    assert sum(n.macs * n.effectual_fraction for n in fused) == pytest.approx(6 * b * h * per_head * e)
    # no [B, H, S, T] score tensor crosses memory: the kernels read the user's mask [B, 1, S, T] at most
    gt = traffic_of(g)
    groups = kernel_groups(g, spans=gt.spans)
    crossing = {t for k in kernel_traffic(g, gt.nodes, groups, gt.exposed) for t, n in (*k.reads.items(),
                                                                                     *k.writes.items()) if n > 0}
    square = [int(np.prod(g.shape(t))) for t in crossing if list(g.shape(t)).count(s) >= 2]  # no other dim is 10
    assert square == ([] if "window" in kwargs else [b * s * s])


def _window_n(n: int, left: int, right: int) -> np.ndarray:
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return (j >= i - left) & (j <= i + right)


@pytest.mark.parametrize("kwargs, per_head", [
    ("is_causal=True", lambda s: s * (s + 1) // 2),
    ("local_window_size=(3, 0)", lambda s: int(_window_n(s, 3, 0).sum())),
    ("mask=m, is_causal=True", lambda s: s),
    ("mask=None", None),
])
def test_forward_capture_prices_the_kept_share(tmp_path: Path, kwargs: str, per_head) -> None:  # noqa: ANN001
    # the math path (no --train): the nodes keep the rectangle (MACs as jax computes them), the score-sized
    # tensors carry the kept fraction, so the bound's work in QK^T and PV is the kept positions'
    from solar_io.frontends.jax.capture import capture_program, load_program
    from solar_io.metrics import graph_metrics

    b, s, h, e, d = 2, 10, 4, 8, 32
    src = tmp_path / "fwd.py"
    src.write_text(MODEL.replace("KWARGS", kwargs))
    g = capture_program(load_program(src)).graph
    assert g.validation.status == "passed", g.validation.reason
    proj, att = b * s * d * d, b * h * s * s * e
    assert graph_metrics(g).macs == 4 * proj + 2 * att
    masks = [a for a in g.assumptions if a.kind == "attention_mask"]
    if per_head is None:
        assert not masks  # no mask: nothing declared
        return
    (a,) = masks
    values = dict(a.values)
    assert values["kept"] == (b * h * per_head(s),) and values["positions"] == (b * h * s * s,)
    assert values["known"] == ("mask=m" not in kwargs,)
    rows = bound(g, "h100-sxm").nodes
    dots = [n for n in rows if g.node_map[n.name].op == "jax.dot_general"]
    assert sum(n.macs * n.effectual_fraction for n in dots) == pytest.approx(4 * proj + 2 * b * h * per_head(s) * e)


NESTED = """
import jax
import jax.numpy as jnp
import numpy as np
B, S, H, E, L = 2, 10, 4, 8, 3
def get_params():
    r = np.random.default_rng(0)
    return {"w": jnp.asarray(r.standard_normal((L, H * E, H * E)) / 8, jnp.float32)}
@jax.jit
def layer(x, w):
    q = (x.reshape(B * S, H * E) @ w).reshape(B, S, H, E)
    return x + jax.nn.dot_product_attention(q, x, x, is_causal=True)
def model(params, x):
    WRAP
def get_inputs():
    return [jnp.asarray(np.random.default_rng(1).standard_normal((B, S, H, E)), jnp.float32)]
"""


@pytest.mark.parametrize("wrap, calls", [
    ("return layer(x, params['w'][0])", 1),  # inside a jit's body
    ("return jax.lax.scan(lambda c, w: (layer(c, w), None), x, params['w'])[0]", 3),  # each unrolled step
    ("return jax.checkpoint(lambda y: layer(y, params['w'][1]))(x)", 1),  # a remat body
])
def test_masked_regions_inside_jit_scan_and_remat_bodies_are_priced_at_the_kept_share(
        tmp_path: Path, wrap: str, calls: int) -> None:
    # As at the top level: a flash kernel skips the masked blocks wherever the attention sits, so the
    # causal triangle (s(s+1)/2 of s^2 per head) is declared in every run of the body.
    from solar_io.frontends.jax.capture import capture_program, load_program
    from solar_io.metrics import graph_metrics

    b, s, h, e = 2, 10, 4, 8
    src = tmp_path / "nested.py"
    src.write_text(NESTED.replace("WRAP", wrap))
    g = capture_program(load_program(src)).graph
    assert g.validation.status == "passed", g.validation.reason
    (a,) = [a for a in g.assumptions if a.kind == "attention_mask"]
    values = dict(a.values)
    assert values["calls"] == calls and values["kept"] == (b * h * s * (s + 1) // 2,) * calls
    assert values["known"] == (True,) * calls
    proj, att = b * s * (h * e) ** 2, b * h * s * s * e
    assert graph_metrics(g).macs == calls * (proj + 2 * att)
    rows = bound(g, "h100-sxm").nodes
    dots = [n for n in rows if g.node_map[n.name].op == "jax.dot_general"]
    kept = b * h * s * (s + 1) // 2 * e
    assert sum(n.macs * n.effectual_fraction for n in dots) == pytest.approx(calls * (proj + 2 * kept))


def test_scores_too_large_to_evaluate_keep_one_key_per_row(monkeypatch) -> None:  # noqa: ANN001
    # The evaluation holds ~40 B per score position; past MAX_EVALUATED the least any mask keeps (one key
    # per query row: still a lower bound) is taken, and the fact says why.
    import solar_io.frontends.jax.attention as attention

    causal = lambda q, k, v: att(q, k, v, is_causal=True)  # noqa: E731
    assert _kept(causal, X, X, X).kept == H * S * (S + 1) // 2
    monkeypatch.setattr(attention, "MAX_EVALUATED", H * S * S - 1)
    m = _kept(causal, X, X, X)
    assert (m.kept, m.total, m.known) == (H * S, H * S * S, False) and "score positions" in m.why
