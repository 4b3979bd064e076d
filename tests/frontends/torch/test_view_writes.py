"""In-place copies into views of a tensor the program made, and ``@torch.no_grad()`` bodies, lowered
where they stand (``frontends/torch/view_writes.py``, ``lower.grad_mode_body``; issue 17's L1/094, a
2,131-step RWKV loop whose capture decomposed the whole program first).

Each case is validated against the eager run; the bytes of the writes are derived by hand.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from solar_io.frontends.torch.capture import _export, capture_source  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.frontends.torch.view_writes import view_copies  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

B, S, H = 2, 5, 3

LOOP = textwrap.dedent(f"""
    import torch

    class Model(torch.nn.Module):
        @torch.no_grad()
        def forward(self, key):
            out = torch.zeros_like(key, dtype=torch.float32)
            state = torch.zeros_like(key[:, 0])
            for t in range(key.shape[1]):
                state = state * 0.5 + key[:, t]
                out[:, t] = state * 2
            return out

    def get_inputs():
        return [torch.randn({B}, {S}, {H})]
    """)


def _capture(tmp_path: Path, text: str, name: str = "m.py"):
    p = tmp_path / name
    p.write_text(text)
    cap = capture_source(load_source(p), validate=True)
    assert cap.graph.validation.status == "passed", cap.graph.validation.reason
    return cap


def _calls(gm) -> list:
    out = []
    for m in gm.modules():
        if isinstance(m, torch.fx.GraphModule):
            out += [n.target for n in m.graph.nodes if n.op == "call_function"]
    return out


def test_a_loop_writing_rows_of_its_output_is_not_decomposed_and_moves_the_rows(tmp_path: Path):
    cap = _capture(tmp_path, LOOP)
    calls = _calls(cap.program.graph_module)
    assert torch.ops.aten.copy_.default in calls  # the program as exported: no whole-program decomposition
    assert torch.ops.higher_order.wrap_with_set_grad_enabled in calls
    g = cap.graph
    assert not any(n.kind == "opaque" for n in g.nodes)
    writes = [n for n in g.nodes if n.op == "aten.copy_" and n.kind == "einsum"]
    assert len(writes) == S and all(n.init is not None for n in writes)
    by_name = {m.name: m for m in graph_metrics(g).nodes}
    row = B * H * 4  # one out[:, t] of fp32
    # every write but the last stores its row in place; the last is the returned tensor, written whole
    # (its other rows copied from the earlier writes' result)
    for n in writes[:-1]:
        assert sum(by_name[n.name].bytes_written.values()) == row
    last = by_name[writes[-1].name]
    assert sum(last.bytes_written.values()) == B * S * H * 4
    assert last.bytes_read[writes[-2].outputs[0].tensor] == (S - 1) * row


STALE = textwrap.dedent("""
    import torch

    class Model(torch.nn.Module):
        def forward(self, x):
            out = torch.zeros(4, 6)
            first = out[0]          # a view taken before the write and read after it: sees the write
            out[0] = x
            return first * 2 + out.sum()

    def get_inputs():
        return [torch.randn(6)]
    """)


def test_a_view_read_after_the_write_leaves_the_copy_to_decomposition(tmp_path: Path):
    p = tmp_path / "stale.py"
    p.write_text(STALE)
    src = load_source(p)
    ep = _export(src.model("meta"), src.inputs("meta"))
    (copy,) = [n for n in ep.graph.nodes if n.target is torch.ops.aten.copy_.default]
    assert copy not in view_copies(ep.graph)
    _capture(tmp_path, STALE, "stale2.py")  # decomposed instead: still the program's values


NESTED = textwrap.dedent("""
    import torch

    class Model(torch.nn.Module):
        def forward(self, x, y):
            out = x * 1.0
            out[1, :, 2:8:2] = y    # select, then a strided slice: 3 x 3 elements
            out[:, 0, 0] = 7.0      # a value broadcast over a select of a select
            return out

    def get_inputs():
        return [torch.randn(3, 3, 9), torch.randn(3, 3)]
    """)


def test_writes_through_selects_and_strided_slices(tmp_path: Path):
    cap = _capture(tmp_path, NESTED)
    g = cap.graph
    writes = [n for n in g.nodes if n.op == "aten.copy_" and n.kind == "einsum"]
    assert len(writes) == 2
    first = {m.name: m for m in graph_metrics(g).nodes}[writes[0].name]
    assert sum(first.bytes_written.values()) == 3 * 3 * 4  # in place: the 9 elements y fills


VIEW_ROOT = textwrap.dedent("""
    import torch

    class Model(torch.nn.Module):
        def forward(self, x):
            buf = x * 2
            flat = buf.view(2, 12)
            flat[:, 0] = 1.0       # writes buf through a view of it: left to decomposition
            return buf

    def get_inputs():
        return [torch.randn(4, 6)]
    """)


def test_a_write_through_a_reshaped_view_is_left_to_decomposition(tmp_path: Path):
    p = tmp_path / "view_root.py"
    p.write_text(VIEW_ROOT)
    src = load_source(p)
    ep = _export(src.model("meta"), src.inputs("meta"))
    assert view_copies(ep.graph) == {}
    _capture(tmp_path, VIEW_ROOT, "view_root2.py")


def test_per_node_validation_checks_the_nodes_of_a_no_grad_body(tmp_path: Path):
    p = tmp_path / "loop.py"
    p.write_text(LOOP)
    cap = capture_source(load_source(p), validate=True, validate_budget=1)  # over budget: per node
    v = cap.graph.validation
    assert v.status == "passed" and v.method == "reference-executor per node", v.reason
    assert "unchecked" not in v.reason and "wrap_with_set_grad_enabled" not in v.reason
    checked = int(v.reason.split("validated per node at reduced sizes: ")[1].split(" of ")[0])
    assert checked >= 4  # zeros_like, mul, add, copy_ (and the selects) each checked on its own


def test_a_failed_validation_names_the_diverging_node_inside_a_no_grad_body(tmp_path: Path):
    """The graph's ``state * 0.5`` of the first step turned into ``state + 0.5``: the node-by-node rerun
    runs the no_grad body node by node too and names that node, not the body as a whole."""
    from dataclasses import replace

    from solar_io.frontends.torch.check import _sources
    from solar_io.frontends.torch.divergence import first_divergence

    cap = _capture(tmp_path, LOOP)
    (mul,) = [n for n in cap.graph.nodes if n.name == "mul" and n.map == "mul"]
    cap.graph = replace(cap.graph, nodes=tuple(replace(n, map="add") if n is mul else n for n in cap.graph.nodes))
    torch.manual_seed(0)
    model = cap.source.model("cpu")
    torch.manual_seed(1)
    inputs = cap.source.inputs("cpu")
    where = first_divergence(cap, _sources(cap, model, inputs), model, inputs)
    assert where is not None and where.startswith("mul "), where


ZERO_ROWS = textwrap.dedent("""
    import torch

    class Model(torch.nn.Module):
        @torch.no_grad()
        def forward(self, x, lens):
            out = torch.empty(4, 8, 16)
            for b in range(4):
                if int(lens[b].item()) == 0:  # FlashInfer's paged decode: an empty request's row
                    out[b].zero_()
                    continue
                out[b] = x[b] * 2.0
            out[1, 2].fill_(3.0)
            return out

    def get_inputs():
        return [torch.randn(4, 8, 16), torch.tensor([3, 0, 2, 0])]
    """)


def test_zero_and_fill_of_a_view_are_copies_of_one_value(tmp_path: Path):
    """``out[b].zero_()`` and ``out[1, 2].fill_(v)`` into a tensor the program made: written where they
    stand, as copies of one value (an unruled ``zero_`` made the whole program decompose first: most of
    a FlashInfer paged-decode capture's time), each charged the elements it writes, by hand."""
    cap = _capture(tmp_path, ZERO_ROWS)
    calls = _calls(cap.program.graph_module)
    assert torch.ops.aten.zero_.default in calls and torch.ops.aten.fill_.Scalar in calls  # not decomposed
    g = cap.graph
    assert not any(n.kind == "opaque" for n in g.nodes)
    writes = [n for n in g.nodes if n.op == "aten.copy_" and n.kind == "einsum"]
    assert len(writes) == 5  # two rows zeroed, two rows computed, one fill of a row of 16
    by_name = {m.name: m for m in graph_metrics(g).nodes}
    row = 8 * 16 * 4
    for n in writes[:-1]:
        assert sum(by_name[n.name].bytes_written.values()) == row
    last = by_name[writes[-1].name]  # the returned tensor, written whole, the fill's 16 elements its own
    assert sum(last.bytes_written.values()) == 4 * row
    assert last.bytes_read[writes[-2].outputs[0].tensor] == 4 * row - 16 * 4


def test_finding_the_copies_of_a_long_loop_reads_each_node_a_bounded_number_of_times(tmp_path: Path, monkeypatch):
    # the stale-view test once scanned every node between the root and each copy: steps^2 reads of a
    # loop's nodes (L1/094's 4,096 steps); now a running maximum per storage, so reads grow with the nodes
    import solar_io.frontends.torch.view_writes as vw

    steps = 48
    p = tmp_path / "long.py"
    p.write_text(LOOP.replace("@torch.no_grad()", "").replace(f"randn({B}, {S}, {H})", f"randn({B}, {steps}, {H})"))
    src = load_source(p)
    ep = _export(src.model("meta"), src.inputs("meta"))
    reads = []
    storage = vw._storage
    monkeypatch.setattr(vw, "_storage", lambda n: reads.append(n) or storage(n))
    found = vw.view_copies(ep.graph)
    assert len(found) == steps
    assert len(reads) <= 3 * len(ep.graph.nodes)
