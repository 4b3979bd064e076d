"""The JAX frontend: per-primitive rule checks, model captures, MACs, CLI dispatch."""

from __future__ import annotations

from pathlib import Path

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from inprocess import run_main  # noqa: E402
from jax import lax  # noqa: E402
from paths import TESTS  # noqa: E402

from solar_io.format.files import dumps, loads  # noqa: E402
from solar_io.frontends.common.errors import NoRuleError  # noqa: E402
from solar_io.frontends.jax import capture_file, capture_function  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

MODELS = TESTS / "models_jax"
K = jax.random.PRNGKey(0)


def rnd(*shape: int, seed: int = 0) -> jax.Array:
    """Seeded normal values; numpy draws them (jax.random compiles once per shape: seconds at import)."""
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32))


X = rnd(3, 4, 5)
A, B_ = rnd(2, 3, 4, seed=1), rnd(2, 4, 5, seed=2)
IMG = rnd(2, 9, 9, 4, seed=3)
IMG_NCHW = rnd(2, 4, 9, 9, seed=4)

# (id, function, inputs): each is captured, run on the executor and compared with jax.jit
CASES = [
    ("add_mul_sub_div", lambda x, y: (x + y) * x - y / (jnp.abs(y) + 1), (X, X * 2)),
    ("broadcast", lambda x, y: x + y, (X, rnd(4, 1, seed=5))),
    ("transcendental", lambda x: jnp.exp(x) + jnp.log(jnp.abs(x) + 1) + jnp.tanh(x) + jnp.sin(x) * jnp.cos(x)
     + jax.nn.sigmoid(x) + lax.rsqrt(jnp.abs(x) + 1) + jnp.sqrt(jnp.abs(x)) + lax.erf(x), (X,)),
    ("pow_square", lambda x: x ** 2 + x ** 3 + jnp.abs(x) ** 0.5 + jnp.log1p(jnp.abs(x)) + jnp.expm1(x), (X,)),
    ("compare_select", lambda x, y: jnp.where(x > y, x, y) + jnp.where((x <= 0) & (y > 0), 1.0, 0.0), (X, X.T.T * 0.5)),
    ("max_min_clip", lambda x: jnp.maximum(x, 0.1) + jnp.minimum(x, -0.1) + jnp.clip(x, -0.5, 0.5), (X,)),
    ("reduce", lambda x: (x.sum(0), x.max(1), x.min(2), x.prod(2), x.mean()), (X,)),
    ("any_all", lambda x: (jnp.any(x > 1, axis=0), jnp.all(x > -2, axis=(1, 2))), (X,)),
    ("bf16_matmul", lambda a, b: a.astype(jnp.bfloat16) @ b.astype(jnp.bfloat16), (rnd(3, 4), rnd(4, 6, seed=1))),
    ("argmax", lambda x: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=-1)), (X,)),
    ("matmul", lambda a, b: a @ b, (rnd(3, 4), rnd(4, 6, seed=1))),
    ("dot_batch", lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), (A, B_)),
    ("dot_odd_dims", lambda a, b: lax.dot_general(a, b, (((1, 0), (0, 2)), ((), ()))), (rnd(3, 4, 5), rnd(4, 6, 3))),
    ("einsum", lambda a, b: jnp.einsum("bij,bjk->bki", a, b), (A, B_)),
    ("vecdot", lambda a: a @ a, (rnd(7),)),
    ("reshape_transpose", lambda x: x.reshape(12, 5).T.reshape(5, 3, 4)[None].squeeze(0), (X,)),
    ("expand_broadcast", lambda x: jnp.broadcast_to(x[:, None], (3, 2, 4, 5)) * 2, (X,)),
    ("slice_strided", lambda x: x[1:, ::2, 1:4], (X,)),
    ("concat_split", lambda x: jnp.concatenate(jnp.split(x, [1, 3], axis=1)[::-1], axis=1), (X,)),
    ("stack", lambda x: jnp.stack([x, x * 2, -x], axis=1) + jnp.stack([x, x, x], axis=-1).transpose(0, 3, 1, 2),
     (X,)),
    ("pad", lambda x: jnp.pad(x, ((1, 0), (0, 2), (1, 1)), constant_values=-1.0), (X,)),
    ("cast", lambda x: (x.astype(jnp.bfloat16) * 2, x.astype(jnp.float16).astype(jnp.float32)), (X,)),
    ("iota", lambda x: x + jnp.arange(5), (X,)),
    ("softmax", lambda x: jax.nn.softmax(x, -1), (X,)),
    ("gelu_silu", lambda x: jax.nn.gelu(x) + jax.nn.silu(x) + jax.nn.gelu(x, approximate=False), (X,)),
    ("conv_nchw", lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 2), (0, 1)), rhs_dilation=(1, 2)),
     (IMG_NCHW, rnd(6, 4, 3, 3, seed=6))),
    ("conv_nhwc_groups", lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2),
     (IMG, rnd(3, 3, 2, 6, seed=7))),
    ("conv_depthwise_1d", lambda x, w: lax.conv_general_dilated(x, w, (1,), "VALID", feature_group_count=4),
     (rnd(2, 4, 10, seed=8), rnd(4, 1, 3, seed=9))),
    ("maxpool", lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"), (IMG,)),
    ("avgpool", lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4, (IMG,)),
    ("take", lambda t, i: jnp.take(t, i, axis=0), (rnd(10, 4), jnp.array([[1, 9], [0, 3]]))),
    ("take_axis1", lambda t, i: jnp.take(t, i, axis=1), (rnd(3, 10, 4), jnp.array([2, 7, 7]))),
    ("nested_jit", lambda x: jax.jit(lambda y: jax.nn.relu(y) * 2)(x) + 1, (X,)),
    ("remat", lambda x: jax.checkpoint(lambda y: jnp.sin(y) * y)(x), (X,)),
    ("custom_jvp", lambda x: jax.nn.relu(x) + jax.nn.softplus(x), (X,)),
    ("scan_cumsum", lambda x: lax.scan(lambda c, v: (c + v, c * v), jnp.zeros(5), x[0])[1], (X,)),
    ("scan_reverse", lambda x: lax.scan(lambda c, v: (c * 0.5 + v, c), x[0, 0], x[0], reverse=True), (X,)),
    ("gather_two_index_arrays", lambda a, i, j: a[i, j], (rnd(5, 6), jnp.array([0, 2, 4]), jnp.array([1, 3, 5]))),
    ("gather_middle_axis_2d_ids", lambda a, i, j: a[i, :, j],
     (rnd(4, 5, 6), jnp.array([[0, 3], [1, 2]]), jnp.array([[5, 0], [1, 1]]))),
    ("dynamic_update_slice", lambda a: lax.dynamic_update_slice(a, jnp.zeros((2, 3)) - 1, (1, 2)), (rnd(5, 6),)),
    ("dynamic_update_slice_rows", lambda a, u: lax.dynamic_update_slice(a, u, (4, 0)), (rnd(5, 6), rnd(1, 6))),
    ("dynamic_slice_traced_start", lambda a, p: lax.dynamic_slice(a, (p, 1), (2, 3)), (rnd(5, 6), jnp.int32(2))),
    ("dynamic_slice_clamped_starts", lambda a, p: lax.dynamic_slice(a, (p, p), (2, 3)), (rnd(5, 6), jnp.int32(4))),
    ("index_with_traced_scalar", lambda a, i: a[i], (rnd(5, 6), jnp.int32(3))),
    ("kv_cache_write_at_traced_position", lambda c, n, p: lax.dynamic_update_slice(c, n, (0, p, 0)),
     (rnd(2, 8, 4), rnd(2, 1, 4, seed=2), jnp.int32(5))),
    ("fori_loop_traced_bounds", lambda a: lax.fori_loop(jnp.int32(1), jnp.int32(4), lambda k, c: jnp.sin(c) + k, a),
     (X,)),
    ("special_functions_1_1", lambda x: jnp.tan(x * 0.5) + jnp.arcsin(jnp.tanh(x)) + jnp.arctan2(x, x + 2)
     + jnp.sinh(x * 0.5) + jnp.arccosh(jnp.abs(x) + 1.5) + lax.erf_inv(jnp.tanh(x) * 0.9) + lax.erfc(x)
     + jnp.log1p(jnp.abs(x)) + jnp.expm1(x) + jnp.exp2(x) + lax.rem(x, 0.7), (X,)),
    ("flip", lambda x: jnp.flip(x, (0, 2)) * 2, (X,)),
    ("cond_constant_predicate", lambda x: lax.cond(True, lambda y: y * 2, lambda y: y + 1, x)
     + lax.switch(2, [jnp.sin, jnp.cos, jnp.tanh], x), (X,)),
    ("optimization_barrier", lambda x: sum(lax.optimization_barrier((x, x * 2))), (X,)),
    ("while_counter", lambda a: lax.while_loop(lambda c: c[0] <= 2, lambda c: (c[0] + 1, c[1] * 2), (0, a))[1], (X,)),
]

DN = ("NHWC", "HWIO", "NHWC")
# convolutions, transposed (lhs dilation) and forward: (id, function, inputs)
TRANSPOSED = [
    ("same_s2", lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=DN),
     (rnd(2, 5, 5, 3), rnd(3, 3, 3, 4, seed=1))),
    ("valid_s2_uneven_phases", lambda x, w: lax.conv_transpose(x, w, (2, 2), "VALID", dimension_numbers=DN),
     (rnd(2, 5, 5, 3), rnd(3, 3, 3, 4, seed=1))),
    ("k4_s2x3_asym_pad", lambda x, w: lax.conv_transpose(x, w, (2, 3), ((1, 2), (2, 1)), dimension_numbers=DN),
     (rnd(1, 4, 5, 3), rnd(4, 4, 3, 2, seed=1))),
    ("lhs3_stride2_rhs_dil2_1d", lambda x, w: lax.conv_general_dilated(x, w, (2,), ((3, 1),), lhs_dilation=(3,),
                                                                       rhs_dilation=(2,)),
     (rnd(2, 3, 7), rnd(4, 3, 4, seed=2))),
    ("lhs2_stride3_1d", lambda x, w: lax.conv_general_dilated(x, w, (3,), ((0, 2),), lhs_dilation=(2,)),
     (rnd(2, 3, 9), rnd(4, 3, 5, seed=2))),
    # forward convolutions (lhs dilation 1: no holes), for the same relation to XLA
    ("forward_strided_dilated_padded", lambda x, w: lax.conv_general_dilated(
        x, w, (2, 1), ((2, 1), (0, 3)), rhs_dilation=(1, 2), dimension_numbers=DN), (IMG, rnd(3, 3, 4, 5, seed=6))),
    ("forward_grouped", lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=DN,
                                                              feature_group_count=2), (IMG, rnd(3, 3, 2, 6, seed=7))),
]


@pytest.mark.parametrize("fn,inputs", [c[1:] for c in TRANSPOSED], ids=[c[0] for c in TRANSPOSED])
def test_conv_macs_by_brute_force(fn, inputs) -> None:  # noqa: ANN001
    """MACs = products whose dilated-input position is not a hole, counted by brute force over
    (output, tap) pairs from the primitive's own parameters: the position ``j = s*o + d*k - lo``
    must be a multiple of the lhs dilation. Taps that land in the padding border count, as for a
    forward convolution (and as FlopCounterMode counts convolutions). XLA's cost analysis counts
    only products with an in-bounds input (``0 <= j / l < I``), checked here by the same brute
    force: a subset of ours."""
    import itertools

    eqn = jax.make_jaxpr(fn)(*inputs).jaxpr.eqns[-1]
    p = eqn.params
    lhs, rhs, osp = p["dimension_numbers"]
    x, w = inputs
    out = eqn.outvars[0].aval.shape
    every, inside = [], []
    for i in range(len(p["lhs_dilation"])):
        ld, s, d, lo = p["lhs_dilation"][i], p["window_strides"][i], p["rhs_dilation"][i], p["padding"][i][0]
        js = [s * o + d * k - lo for o, k in itertools.product(range(out[osp[2 + i]]), range(w.shape[rhs[2 + i]]))]
        every.append(sum(1 for j in js if j % ld == 0))
        inside.append(sum(1 for j in js if j % ld == 0 and 0 <= j // ld < x.shape[lhs[2 + i]]))
    per_point = x.shape[lhs[0]] * w.shape[rhs[1]] * w.shape[rhs[0]]  # batch x in-channels per group x out
    cap = capture_function(fn, *inputs, name="conv_transpose.py")
    assert cap.lowerer.opaque == []
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason
    assert graph_metrics(cap.graph).macs == per_point * int(np.prod(every))
    cost = jax.jit(fn).lower(*inputs).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    if cost and "flops" in cost:
        assert cost["flops"] == 2 * per_point * int(np.prod(inside))


@pytest.mark.parametrize("fn,inputs", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_matches_jax(fn, inputs) -> None:  # noqa: ANN001
    cap = capture_function(fn, *inputs, name="case.py")
    assert cap.lowerer.opaque == [], cap.lowerer.opaque
    v = cap.graph.validation
    assert v.status == "passed", v.reason


def test_unknown_primitive_is_opaque_and_validated() -> None:
    def f(x):
        y = lax.while_loop(lambda c: jnp.max(c) < 100.0, lambda c: c * 2 + 1, x)  # data-dependent trips
        return jnp.cumsum(y, axis=0) + lax.population_count(jnp.arange(5))  # popcount: no rule

    cap = capture_function(f, X, name="loop.py")
    prims = {p for _, p, _ in cap.lowerer.opaque}
    assert "while" in prims
    assert any("trip count" in r for _, _, r in cap.lowerer.opaque)
    assert all(n.reason for n in cap.graph.nodes if n.kind == "opaque")
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason
    with pytest.raises(NoRuleError, match="while"):
        capture_function(f, X, name="loop.py", strict=True)


def test_capture_is_deterministic() -> None:
    a = dumps(capture_file(MODELS / "transformer.py", validate=False))
    b = dumps(capture_file(MODELS / "transformer.py", validate=False))
    assert a == b


def test_cli_dispatches_to_jax(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from solar_io.cli.main import app

    out = tmp_path / "g.yaml"
    res = CliRunner().invoke(app, ["capture", str(MODELS / "mlp.py"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "frontend: jax" in out.read_text()


def test_parameters_are_abstract() -> None:
    calls = []

    def f(x):
        calls.append(type(x).__name__)
        return x * 2

    capture_function(f, np.ones((2, 2), np.float32), validate=False)
    assert calls and all("Tracer" in c for c in calls)


LOOP_MODEL = """
import jax
from jax import lax


def get_inputs():
    return (jax.numpy.ones((3, 4)),)


def model(x):
    return lax.while_loop(lambda c: jax.numpy.max(c) < 100.0, lambda c: c * 2 + 1, x)
"""


def _main(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    from solar_io.cli.main import main

    try:
        main(["capture", *args])
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_reports_opaque_and_strict_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    src = tmp_path / "loop.py"
    src.write_text(LOOP_MODEL)
    code, _, err = _main(capsys, str(src), "-o", str(tmp_path / "g.yaml"))
    assert code == 0, err
    assert "opaque" in err and "while" in err
    code, _, err = _main(capsys, str(src), "--strict", "-o", str(tmp_path / "h.yaml"))
    assert code == 1
    assert err.strip() == ("error: loop.py: primitive while (node while_1): while: while loop: "
                           "trip count not static (--strict)")
    assert not (tmp_path / "h.yaml").exists()


def test_opaque_sort_validates() -> None:
    def f(x):
        return jnp.sort(x, axis=-1) + x.at[0].set(1.0)

    cap = capture_function(f, X, name="ops.py")
    assert {p for _, p, _ in cap.lowerer.opaque} == {"sort"}
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason


M56 = rnd(5, 6)
IDS = jnp.array([0, 2, 2])
# (id, function, inputs, vector FLOPs derived by hand)
SCANS_SCATTERS = [
    # a sequential inclusive prefix: n - 1 combines per row (6 columns of 5)
    ("cumsum", lambda a: jnp.cumsum(a, 0), (M56,), 6 * 4),
    # reversed along the 6 columns: 5 rows of 5 combines; the reversals are views
    ("cumprod_reverse", lambda a: lax.cumprod(a, 1, reverse=True), (M56,), 5 * 5),
    ("cummax", lambda a: lax.cummax(a, 1), (M56,), 5 * 5),
    # 3 index rows normalised (lt, add, select: 3 x 3), then 3 rows x 6 combined (repeated index 2)
    ("scatter_add_rows", lambda a, i, u: a.at[i].add(u), (M56, IDS, rnd(3, 6, seed=3)), 9 + 18),
    # overwrite (reduce none): no combine at all
    ("scatter_set_row", lambda a: a.at[1].set(7.0), (M56,), 0),
    ("scatter_max_columns", lambda a, i, u: a.at[:, i].max(u), (M56, IDS, rnd(5, 3, seed=4)), 9 + 15),
    ("scatter_add_two_index_arrays", lambda a, i, j, u: a.at[i, j].add(u),
     (M56, IDS, jnp.array([1, 5, 5]), rnd(3, seed=5)), 18 + 3),
    ("segment_sum", lambda d, s: jax.ops.segment_sum(d, s, num_segments=4),
     (rnd(7, 3), jnp.array([0, 1, 1, 3, 0, 2, 3])), 7 * 3),
]


@pytest.mark.parametrize("fn,inputs,flops", [c[1:] for c in SCANS_SCATTERS], ids=[c[0] for c in SCANS_SCATTERS])
def test_scans_and_scatters(fn, inputs, flops) -> None:  # noqa: ANN001
    """cumsum/cumprod/cummax lower to format-1.1 scans, scatters to @-indexed outputs with init."""
    cap = capture_function(fn, *inputs, name="scan.py")
    assert cap.lowerer.opaque == []
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason
    m = graph_metrics(cap.graph)
    assert m.macs == 0 and m.flops_vector == flops
    text = dumps(cap.graph)
    assert dumps(loads(text)) == text


def test_opaque_reasons_are_specific() -> None:
    def f(x):
        v, i = lax.top_k(x, 2)
        y = lax.reduce_precision(x, 5, 10) + lax.reduce_precision(x, 8, 23)
        return v + jnp.argsort(x, axis=-1)[..., :2] + y[..., :2] + i

    cap = capture_function(f, X, name="ops.py")
    reasons = {p: r for _, p, r in cap.lowerer.opaque}
    # rounding to fp16's 5/10 bits is real work; to fp32's own 8/23 bits it is the identity
    assert set(reasons) == {"top_k", "sort", "reduce_precision"}
    assert len(cap.lowerer.opaque) == 3
    assert "top-k" in reasons["top_k"] and "sort" in reasons["sort"]
    assert "10 mantissa bits" in reasons["reduce_precision"]
    assert all(n.reason == reasons[n.op.removeprefix("jax.")] for n in cap.graph.nodes if n.kind == "opaque")
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason


def test_random_numbers_are_opaque_and_replayed() -> None:
    """PRNG keys inside the program travel as their uint32 key data; seeding, splitting and the
    hash rounds are opaque (reported), and validation replays them, so the graph reproduces
    jax's random numbers exactly."""
    def f(x):
        k1, k2 = jax.random.split(jax.random.key(7))
        return x * jax.random.uniform(k1, x.shape) + jax.random.normal(jax.random.fold_in(k2, 3), x.shape)

    cap = capture_function(f, X, name="rng.py")
    prims = {p for _, p, _ in cap.lowerer.opaque}
    assert {"random_seed", "random_split", "random_fold_in", "random_bits"} <= prims
    assert all("random number generation" in r for _, p, r in cap.lowerer.opaque if p.startswith("random_"))
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason


def test_while_counter_unrolled_like_scan() -> None:
    """A while loop on a static counter is the same computation as the scan of fori_loop with
    constant bounds: same MACs (3 steps of a 4x4 @ 4x4 product) and FLOPs."""
    w = rnd(4, 4, seed=3)

    def by_while(x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, jnp.tanh(c[1] @ w)), (0, x))[1]

    def by_scan(x):
        return lax.fori_loop(0, 3, lambda _, c: jnp.tanh(c @ w), x)

    a = capture_function(by_while, rnd(4, 4), name="w.py")
    b = capture_function(by_scan, rnd(4, 4), name="s.py")
    assert a.lowerer.opaque == [] and b.lowerer.opaque == []
    assert a.graph.validation.status == "passed", a.graph.validation.reason
    ma, mb = graph_metrics(a.graph), graph_metrics(b.graph)
    assert ma.macs == mb.macs == 3 * 4 * 4 * 4
    assert ma.transcendental == mb.transcendental == 3 * 16


def test_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cases = {
        "raises.py": "import jax\nraise RuntimeError('boom')\n",
        "noinputs.py": "import jax\n\ndef model(x):\n    return x\n",
        "nomodel.py": "import jax\n\ndef get_inputs():\n    return (jax.numpy.ones(3),)\n",
        "key_input.py": ("import jax\n\ndef get_inputs():\n    return (jax.random.key(0),)\n\n"
                         "def model(k):\n    return jax.random.normal(k, (3,))\n"),
    }
    for name, body in cases.items():
        (tmp_path / name).write_text(body)
        code, _, err = _main(capsys, str(tmp_path / name), "-o", str(tmp_path / "g.yaml"))
        assert code == 1, name
        assert err.startswith(f"error: {name}") and len(err.strip().splitlines()) == 1, err
        assert "Traceback" not in err


BIG_MODEL = """
import jax
import jax.numpy as jnp


def get_params():
    return {"w": jnp.ones((8192, 8192)), "w2": jnp.ones((8192, 8192))}


def get_inputs():
    return (jnp.ones((16, 8192)),)


def model(p, x):
    return jax.nn.gelu(x @ p["w"]) @ p["w2"]
"""


def test_big_weights_are_abstract_and_budget_skips(tmp_path: Path) -> None:
    src = tmp_path / "big.py"
    src.write_text(BIG_MODEL)
    g = capture_file(src, validate_budget=64 << 20)  # 2 x 256 MiB of weights: never allocated
    assert g.validation.status == "skipped" and "validate-budget" in g.validation.reason
    assert graph_metrics(g).macs == 2 * 16 * 8192 * 8192


BENCH_STYLE = '''
import jax
import jax.numpy as jnp


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    return jax.random.normal(k1, (4, 8), dtype=dtype), jax.random.normal(k2, (8, 6), dtype=dtype)


def workload(x, w):
    return jax.nn.relu(x @ w)
'''


def test_entry_inputs_from_and_input_specs(tmp_path: Path) -> None:
    """A file in another convention (create_inputs + workload, as JAX benchmark suites write them):
    --entry names the function, --inputs-from the inputs' maker, or --input gives their shapes."""
    src = tmp_path / "bench_style.py"
    src.write_text(BENCH_STYLE)
    for extra in (["--inputs-from", "create_inputs"], ["--input", "x=fp32[4,8]", "--input", "w=fp32[8,6]"]):
        out = tmp_path / "g.yaml"
        res = run_main("capture", str(src), "--entry", f"{src.name}:workload", *extra, "-o", str(out))
        assert res.returncode == 0, res.stderr
        g = loads(out.read_text())
        assert g.validation.status == "passed" and graph_metrics(g).flops_matrix == 2 * 4 * 8 * 6
    for args, msg in ((["--entry", "x:nope", "--inputs-from", "create_inputs"], "--entry names 'nope'"),
                      (["--entry", "x:workload", "--inputs-from", "nope"], "--inputs-from names 'nope'"),
                      (["--inputs-from", "create_inputs"], "defines neither model(*inputs) nor a Flax Model"),
                      (["--entry", "x:workload", "--dtype", "bf16", "--inputs-from", "create_inputs"], "--dtype")):
        res = run_main("capture", str(src), *args)
        assert res.returncode == 1 and res.stderr.count("\n") == 1 and msg in res.stderr, res.stderr


def test_too_large_to_run_is_validated_at_reduced_sizes(tmp_path: Path) -> None:
    """Over the budget, the same function is traced and validated on inputs with every size above 16
    reduced; a program whose sizes are fixed inside it (a reshape to constants) cannot be."""
    from solar_io.frontends.jax.capture import capture_program, load_program

    src = tmp_path / "big.py"
    src.write_text("import jax\nimport jax.numpy as jnp\n\n\ndef get_inputs():\n"
                   "    return [jnp.ones((64, 96)), jnp.ones((96, 48))]\n\n\n"
                   "def model(x, w):\n    return jax.nn.softmax(jnp.tanh(x @ w), axis=-1)\n")
    cap = capture_program(load_program(src), validate_budget=1024)
    v = cap.graph.validation
    assert v.status == "passed" and v.method == "reference-executor at reduced sizes", v.reason
    assert dict(v.reduced_ranks) and all(s <= 16 for _, s in v.reduced_ranks)
    assert graph_metrics(cap.graph).flops_matrix == 2 * 64 * 96 * 48  # the graph keeps its own sizes
    fixed = tmp_path / "fixed.py"
    fixed.write_text(src.read_text().replace("return jax.nn.softmax(jnp.tanh(x @ w), axis=-1)",
                                             "return (x @ w).reshape(32, 96)"))
    v = capture_program(load_program(fixed), validate_budget=1024).graph.validation
    assert v.status == "skipped" and "does not trace" in v.reason
