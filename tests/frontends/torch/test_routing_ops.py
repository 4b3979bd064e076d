"""Selections and samplers lowered instead of opaque (issue 18 item 3, rules/select.py): each op is
captured end to end, validated against eager torch, and its counts are derived by hand.

Per row of ``n`` keys selecting ``k``: ``n - 1`` comparisons (the extreme) + ``k`` ties (one ``where``
per index written); values are a gather (no operations). Bytes: the keys read once, values and
int64 indices written once; the choice itself is generated (no bytes).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.metrics import graph_metrics, node_metrics  # noqa: E402


def _capture(tmp_path: Path, body: str, inputs: str, name: str = "op.py"):
    lines = ["import torch", "import torch.nn as nn", "", "", "class Model(nn.Module):",
             "    def forward(self, *xs):"]
    lines += ["        " + line for line in textwrap.dedent(body).strip().splitlines()]
    lines += ["", "", "def get_inputs():", f"    return {inputs}", ""]
    p = tmp_path / name
    p.write_text("\n".join(lines))
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    assert graph_metrics(g).opaque == ()
    return g


def _counts(g, op: str) -> tuple[float, float, float, float]:
    """(vector FLOPs, matrix FLOPs, bytes read of graph inputs, bytes written of outputs) of ``op``'s nodes."""
    vec = mat = 0.0
    read: dict[str, float] = {}
    written: dict[str, float] = {}
    roles = {t.name: t.role for t in g.tensors}
    for n in g.nodes:
        if n.op != op:
            continue
        m = node_metrics(g, n)
        vec += m.flops_vector
        mat += m.flops_matrix
        for t, b in m.bytes_read.items():  # a tensor the op's kernel reads in several nodes: read once
            if roles[t] == "input":
                read[t] = max(read.get(t, 0.0), b)
        for t, b in m.bytes_written.items():
            if roles[t] == "output":
                written[t] = max(written.get(t, 0.0), b)
    return vec, mat, sum(read.values()), sum(written.values())


def test_topk_counts_the_floor(tmp_path: Path) -> None:
    g = _capture(tmp_path, "v, i = torch.topk(xs[0], 3, dim=-1)\nreturn v * 2, i", "[torch.randn(4, 16)]")
    vec, mat, read, written = _counts(g, "aten.topk")
    assert vec == 4 * (16 - 1) + 4 * 3 and mat == 0
    assert read == 4 * 16 * 4  # x once (the extreme); the gather reads it again at 3 places per row
    assert written == 4 * 3 * 8  # the indices are a graph output; the values feed the multiply
    assert not [t for t in g.tensors if t.name.endswith(".choice") and not t.generated]


def test_smallest_topk_along_dim_0_and_sort_and_argsort(tmp_path: Path) -> None:
    g = _capture(tmp_path, '''
        a, ia = torch.topk(xs[0], 2, dim=0, largest=False)
        s, si = torch.sort(xs[0], dim=0, descending=True)
        o = torch.argsort(xs[0], dim=1)
        return a, ia, s, si, o
    ''', "[torch.randn(6, 5)]")
    assert _counts(g, "aten.topk")[0] == 5 * (6 - 1) + 5 * 2
    assert _counts(g, "aten.sort")[0] == 5 * (6 - 1) + 5 * 6
    vec_arg = _counts(g, "aten.argsort")[0] or _counts(g, "aten.sort")[0] - 55  # argsort may trace as a sort
    assert vec_arg == 6 * (5 - 1) + 6 * 5


def test_histc_nine_operations_per_element(tmp_path: Path) -> None:
    g = _capture(tmp_path, "return torch.histc(xs[0], bins=5, min=-1.0, max=1.0)", "[torch.randn(50)]")
    vec, mat, read, written = _counts(g, "aten.histc")
    assert vec == 9 * 50 and mat == 0  # sub, mul, floor, min, ge, le, and, where; one combine into a bin
    assert read == 50 * 4  # x once; the bins are a scatter into 5 + 1 (out of range) and a view of 5
    assert [g.shape(t.name) for t in g.tensors if t.role == "output"] == [(5,)]


def test_bincount_and_mask_indexing_are_specialised(tmp_path: Path) -> None:
    """bincount's length and x[mask]'s rows come from the inputs' values (small integer/bool inputs are
    known): the graph says so, and each is priced at its floor."""
    g = _capture(tmp_path, '''
        ids, w, x, mask = xs
        return torch.bincount(ids, w), x[mask], torch.masked_select(x, mask)
    ''', "[torch.tensor([0, 3, 3, 1, 4, 0, 0, 2]), torch.rand(8), torch.randn(4, 6), "
         "torch.arange(24).reshape(4, 6) % 3 == 0]")
    spec = {a.subject.split(" at ")[0]: dict(a.values) for a in g.assumptions if a.kind == "specialised"}
    assert spec["bincount"]["lengths"] == (5,)
    assert spec["nonzero"]["rows_of_the_index"] == (8, 8)
    out = {t.name: g.shape(t.name) for t in g.tensors if t.role == "output"}
    assert sorted(out.values()) == [(5,), (8,), (8,)]
    vec = sum(node_metrics(g, n).flops_vector for n in g.nodes if n.op == "solar_io.bincount")
    assert vec == 8  # one combine per id
    idx = sum(node_metrics(g, n).flops_vector for n in g.nodes if n.op == "solar_io.specialised_index")
    assert idx == 2 * ((24 - 1) + 8 * 2)  # per mask: the extreme over 24, one tie per index written


def test_multinomial_and_bernoulli_draw_once_per_sample(tmp_path: Path) -> None:
    g = _capture(tmp_path, '''
        p, q = xs
        return torch.multinomial(p, 4, replacement=True), torch.bernoulli(q)
    ''', "[torch.rand(3, 10), torch.rand(5, 7)]")
    assert _counts(g, "aten.multinomial")[0] == 3 * (10 - 1) + 3 * 4  # the total, one draw per sample
    assert _counts(g, "aten.bernoulli")[0] == 5 * 7  # u < p per element, u generated
