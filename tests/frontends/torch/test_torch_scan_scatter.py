"""Scans and scatters (format 1.1) from PyTorch: counts by hand, what stays opaque and why.

The per-rule agreement with ATen is in tests/frontends/torch/test_torch_rules.py; the corpus models
(cumulative_ops, scatter_ops, gnn_scatter, mamba_like, mamba2_ssd, prod_cumsum) in
tests/frontends/torch/test_torch_corpus.py. Here: the derived counts of the lowered nodes against hand
derivations, and the ops kept opaque on purpose with their reasons.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import solar_io  # noqa: E402
from solar_io import node_metrics  # noqa: E402
from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import Source, _FnModule  # noqa: E402


def capture(fn: Callable, *inputs: torch.Tensor):
    src = Source(Path("case.py"), "case.py", "0" * 64, lambda: _FnModule(fn), lambda: list(inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_source(src, validate=True)


def test_cumsum_counts_a_sequential_scan():
    cap = capture(lambda x: torch.cumsum(x, dim=1), torch.randn(4, 9, 5))
    g = cap.graph
    (node,) = [n for n in g.nodes if n.scan is not None]
    m = node_metrics(g, node)
    assert g.validation.status == "passed" and g.version == solar_io.FORMAT_VERSION
    assert m.macs == 0 and m.transcendental == 0
    assert m.flops_vector == 4 * 5 * (9 - 1)  # n - 1 adds per row: no scan algorithm does fewer
    assert m.bytes == 2 * 4 * 9 * 5 * 4  # read x once, write the result once (fp32)


def test_cummax_with_its_indices_stays_opaque_without_them_is_a_scan():
    values_only = capture(lambda x: torch.cummax(x, dim=0).values * 2, torch.randn(6, 3)).graph
    assert [n.reduce for n in values_only.nodes if n.scan] == ["max"]
    assert not [n for n in values_only.nodes if n.kind == "opaque"]
    both = capture(lambda x: torch.cummax(x, dim=0), torch.randn(6, 3))
    assert both.graph.validation.status == "passed"
    assert {op for _, op, _ in both.lowered.opaque} == {"aten.cummax"}
    assert "indices" in both.lowered.opaque[0][2]


@pytest.mark.parametrize("fn", [
    lambda x: torch.sort(x, dim=-1)[0],
    lambda x: torch.topk(x, 3, dim=-1)[0],
    lambda x: torch.argsort(x, dim=0),
], ids=["sort", "topk", "argsort"])
def test_sort_topk_argsort_are_lowered(fn: Callable):
    """Lowered since issue 18 (rules/select.py; counts in tests/frontends/torch/test_routing_ops.py)."""
    cap = capture(fn, torch.randn(5, 7))
    assert not [n for n in cap.graph.nodes if n.kind == "opaque"]
    assert cap.graph.validation.status == "passed"


@pytest.mark.parametrize("fn", [
    lambda x: torch.kthvalue(x, 2, dim=1)[0],
    lambda x: torch.median(x, dim=1)[0],
], ids=["kthvalue", "median"])
def test_selections_are_opaque_with_a_reason(fn: Callable):
    cap = capture(fn, torch.randn(5, 7))
    opaque = [n for n in cap.graph.nodes if n.kind == "opaque"]
    assert opaque and all("data-dependent selection" in n.reason for n in opaque)
    assert cap.graph.validation.status == "passed"


def test_index_add_bytes_are_the_selected_rows_and_adds_one_per_point():
    """Into an intermediate (its memory may be x's), the scatter moves the selected rows only; returned
    as a new tensor, it writes all 50 rows and reads every row of x (a combine reads the selected too)."""
    x, idx, src = torch.randn(50, 8), torch.tensor([3, 7, 3, 0]), torch.randn(4, 8)
    cap = capture(lambda x, i, s: torch.relu(x.index_add(0, i, s)), x, idx, src)
    g = cap.graph
    (node,) = [n for n in g.nodes if n.init is not None]
    m = node_metrics(g, node)
    assert g.validation.status == "passed"
    rows = 4 * 8 * 4.0  # 4 index values (taken as distinct) of 8 fp32 each, not the 50-row table
    assert m.bytes_written == {node.outputs[0].tensor: rows}
    assert m.bytes_read[node.init] == rows and m.bytes_read[node.inputs[1].tensor] == rows
    assert m.flops_vector == 4 * 8 and m.macs == 0
    returned = capture(lambda x, i, s: x.index_add(0, i, s), x, idx, src).graph
    (node,) = [n for n in returned.nodes if n.init is not None]
    m = node_metrics(returned, node)
    assert m.bytes_written == {node.outputs[0].tensor: 50 * 8 * 4.0} and m.bytes_read[node.init] == 50 * 8 * 4.0
    assert m.flops_vector == 4 * 8 and m.macs == 0


def test_strided_slice_assignment_is_a_scatter_through_a_generated_position_table():
    """``a[..., 1:11:3] = src`` (MRoPE's interleave) was opaque ("slice_scatter with a step"): now one
    scatter over src's 3*4*4 points (positions 1, 4, 7, 10), output index 1 + 3*j from a generated
    table (0 bytes). Into an intermediate it moves the written elements only: 48 fp32 of src read,
    48 written, nothing of ``a`` read (an overwrite)."""
    def f(a, b):
        a = a.clone()
        a[..., 1:11:3] = b[..., 1:11:3] * 2
        return torch.relu(a)

    cap = capture(f, torch.randn(3, 4, 12), torch.randn(3, 4, 12))
    g = cap.graph
    assert g.validation.status == "passed" and not [n for n in g.nodes if n.kind == "opaque"]
    (node,) = [n for n in g.nodes if n.init is not None]  # export's copy_ into the slice (view_writes.py)
    m = node_metrics(g, node)
    table = g.tensor_map[f"{node.name}.positions"]
    assert table.generated and m.bytes_read[table.name] == 0
    assert m.bytes_read == {node.init: 0, node.inputs[1].tensor: 3 * 4 * 4 * 4, table.name: 0}
    assert m.bytes_written == {node.outputs[0].tensor: 3 * 4 * 4 * 4}
