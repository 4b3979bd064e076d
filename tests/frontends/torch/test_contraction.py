"""A broadcast product summed over ranks is captured as one contraction (frontends/common/contract.py).

Each case is a small function captured through the whole torch pipeline and validated against eager
PyTorch (the executor runs the merged einsum). MACs are checked against FlopCounterMode's count of
the same product written as a matrix product, or a closed form; the cases that must stay as written
(a product read twice, a dot of like tensors, a matrix-vector product, a scaled sum, a sum over a
rank only broadcast) keep their vector nodes and count no MACs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from solar_io.backends.bound import bound  # noqa: E402
from solar_io.frontends.common.contract import CONTRACTION_ATTR  # noqa: E402
from solar_io.frontends.common.validation import graph_bytes  # noqa: E402
from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import Source, _FnModule  # noqa: E402
from solar_io.hardware.catalog import load_spec  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402


def capture(fn: Callable, *shapes: tuple[int, ...], dtype: torch.dtype = torch.float32, validate: bool = True):
    makers = [lambda s=s: torch.randn(*s, dtype=dtype) for s in shapes]
    src = Source(Path("case.py"), "case.py", "0" * 64, lambda: _FnModule(fn), lambda: [m() for m in makers])
    g = capture_source(src, validate=validate).graph
    if validate:
        assert g.validation.status == "passed", g.validation.reason
    return g


def merged(g):
    return [n for n in g.nodes if dict(n.attrs).get(CONTRACTION_ATTR)]


def flop_counter_macs(fn: Callable, *args: torch.Tensor) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        fn(*args)
    return fc.get_total_flops() // 2


def test_matmul_written_as_broadcast_product_and_sum():
    m, k, n = 6, 5, 7
    g = capture(lambda a, b: (a.unsqueeze(-1) * b.unsqueeze(0)).sum(1), (m, k), (k, n))
    (node,) = merged(g)
    assert (node.map, node.reduce, node.op) == ("mul", "add", "aten.mul+aten.sum")
    assert (node.name, dict(node.attrs)[CONTRACTION_ATTR]) == ("sum_1", "mul")
    assert not [t for t in g.tensors if t.name == "mul"]  # the product never exists
    assert not [n for n in g.nodes if n.kind == "einsum" and n.map == "mul" and n.reduce == "none"]
    gm = graph_metrics(g)
    a, b = torch.randn(m, k), torch.randn(k, n)
    assert gm.macs == flop_counter_macs(torch.matmul, a, b) == m * k * n
    assert gm.flops_matrix == 2 * m * k * n and gm.flops_vector == 0
    # the validation budget still counts the product eager PyTorch materialises (fp32: 4 bytes a point):
    # inputs, their unsqueezed views (counted as the executor's arrays), the output and the product
    assert graph_bytes(g) == 4 * (2 * (m * k + k * n) + m * n + m * k * n)


def mamba_g(c: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """G[b, i, j, h] = sum_n C[b, i, h, n] B[b, j, h, n] (SOL-ExecBench L1/070's first contraction)."""
    return (c[:, :, None, :, :] * b[:, None, :, :, :]).sum(dim=-1)


def test_mamba_chunk_contractions_by_hand():
    batch, t, h, n, d = 2, 8, 3, 4, 5

    def y_diag(c, b, x):
        m = mamba_g(c, b)  # [b, i, j, h]
        return (m[..., None] * x[:, None]).sum(dim=2)  # sum over j: [b, i, h, d]

    g = capture(y_diag, (batch, t, h, n), (batch, t, h, n), (batch, t, h, d))
    nodes = merged(g)
    assert len(nodes) == 2
    gm = {m.name: m for m in graph_metrics(g).nodes}
    assert sorted(gm[x.name].macs for x in nodes) == sorted([batch * t * t * h * n, batch * t * t * h * d])
    einsum = torch.einsum("bihn,bjhn->bijh", torch.randn(batch, t, h, n), torch.randn(batch, t, h, n))
    assert einsum.shape == (batch, t, t, h)
    assert graph_metrics(g).macs == batch * t * t * h * (n + d)


def test_keepdim_mean_and_view_operands():
    # keepdim: the output keeps a size-1 rank; mean: the sum is merged, the scale stays its own node
    g = capture(lambda a, b: (a[:, :, None] * b[None]).sum(1, keepdim=True), (4, 3), (3, 5))
    (node,) = merged(g)
    assert g.shape(node.outputs[0].tensor) == (4, 1, 5)
    assert graph_metrics(g).macs == 4 * 3 * 5
    g = capture(lambda a, b: (a[:, :, None] * b[None]).mean(1), (4, 3), (3, 5))
    assert len(merged(g)) == 1 and graph_metrics(g).macs == 4 * 3 * 5
    assert [n.op for n in g.nodes if n.kind == "einsum"] == ["aten.mul+aten.mean", "aten.mean"]
    # operands broadcast through expand and permute views
    g = capture(lambda a, b: (a[:, :, None].expand(4, 3, 5) * b.t()[None].expand(4, 3, 5)).sum(1), (4, 3), (5, 3))
    assert len(merged(g)) == 1 and graph_metrics(g).macs == 4 * 3 * 5
    # ... and through copies of them (contiguous() of an expand)
    g = capture(lambda a, b: (a[:, :, None].expand(4, 3, 5).contiguous() * b.t().contiguous()[None]).sum(1),
                (4, 3), (5, 3))
    assert len(merged(g)) == 1 and graph_metrics(g).macs == 4 * 3 * 5


def test_bf16_summed_in_fp32_is_a_bf16_contraction():
    g = capture(lambda a, b: (a[:, :, None] * b[None]).sum(1, dtype=torch.float32), (8, 16), (16, 4),
                dtype=torch.bfloat16)
    (node,) = merged(g)
    assert {g.tensor_map[a.tensor].dtype for a in node.inputs} == {"bf16"}
    assert g.tensor_map[node.outputs[0].tensor].dtype == "fp32"
    rep = bound(g, "b200")
    nb = next(x for x in rep.nodes if x.name == node.name)
    assert nb.compute_dtype == "bf16"
    assert nb.matrix_time == pytest.approx(2 * 8 * 16 * 4 / load_spec("b200").units["matrix"]["bf16"].value)


def test_fp32_contraction_priced_at_tf32_under_the_policy():
    g = capture(lambda a, b: (a.unsqueeze(-1) * b.unsqueeze(0)).sum(1), (32, 16), (16, 8), validate=False)
    (node,) = merged(g)
    peaks = load_spec("b200").units
    rep = bound(g, "b200")
    nb = next(x for x in rep.nodes if x.name == node.name)
    assert nb.matrix_time == pytest.approx(2 * 32 * 16 * 8 / peaks["matrix"]["tf32"].value)
    assert any(node.name in r.nodes for r in rep.precision.repriced if r.rule == "fp32->tf32")
    strict = next(x for x in bound(g, "b200", strict_fp32=True).nodes if x.name == node.name)
    # B200 lists no fp32 matrix peak: strictly priced, the contraction runs on the vector unit
    assert strict.matrix_time == 0
    assert strict.vector_time == pytest.approx(2 * 32 * 16 * 8 / peaks["vector"]["fp32"].value)


@pytest.mark.parametrize(("fn", "shapes"), [
    pytest.param(lambda a, b: ((p := a[:, :, None] * b[None]).sum(1), p), ((4, 3), (3, 5)), id="product-read-twice"),
    pytest.param(lambda a, b: (a * b).sum(-1), ((4, 3), (4, 3)), id="dot-of-like-tensors"),
    pytest.param(lambda a, v: (a * v[None]).sum(-1), ((4, 3), (3,)), id="matrix-vector"),
    pytest.param(lambda a, b: (a * 2.0).sum(-1) + b.sum(), ((4, 3), (2,)), id="scaled-sum"),
    pytest.param(lambda a, b: (a[:, None, :, None].expand(4, 5, 3, 6) * b[None, :, :, None].expand(4, 5, 3, 6))
                 .sum((2, 3)), ((4, 3), (5, 3)), id="sum-over-a-rank-neither-operand-reads"),
    pytest.param(lambda a, b: (a[:, :, None] * b[None]).amax(1), ((4, 3), (3, 5)), id="max-not-sum"),
])
def test_patterns_that_stay_as_written(fn: Callable, shapes: tuple):
    g = capture(fn, *shapes)
    assert not merged(g)
    assert graph_metrics(g).macs == 0
    assert [n for n in g.nodes if n.kind == "einsum" and n.map == "mul" and n.reduce == "none"]
