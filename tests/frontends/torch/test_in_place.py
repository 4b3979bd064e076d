"""In-place updates of an input (format 1.5 ``updates``): a program that assigns into an input and
returns it moves only what it writes; a functional update returned as a new tensor still pays the copy.

Hand counts (fp32, ``pos`` int64): the cache is (1, 2, 16, 8) = 1024 B, the new rows ``k`` are
(1, 2, 3, 8) = 192 B, ``pos`` holds 3 positions = 24 B, and the rows written are 2 x 3 x 8 elements
= 192 B. In place the boundary is k + pos + the rows written; a new tensor is written whole and
copies the 1024 - 192 = 832 B it does not overwrite from the cache.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from solar_io import bound, graph_metrics  # noqa: E402
from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.loader import Source, _FnModule  # noqa: E402

CACHE, ROWS, POS = 1024.0, 192.0, 24.0


def capture(fn: Callable, *inputs: torch.Tensor):
    src = Source(Path("case.py"), "case.py", "0" * 64, lambda: _FnModule(fn), lambda: [x.clone() for x in inputs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_source(src, validate=True).graph


def cache_input(g) -> str:  # noqa: ANN001
    """The graph's name of the cache input (a function's inputs are named by position)."""
    (name,) = [t.name for t in g.tensors if t.role == "input" and g.shape(t.name) == (1, 2, 16, 8)]
    return name


def inputs() -> tuple[torch.Tensor, ...]:
    return torch.randn(1, 2, 16, 8), torch.randn(1, 2, 3, 8), torch.tensor([4, 9, 10])


def in_place(cache: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    cache[:, :, pos] = k
    return cache


@torch.no_grad()
def in_place_no_grad(cache: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Under no_grad the export is functionalised: the update is the input's USER_INPUT_MUTATION and
    the returned cache the same value (it used to be lowered as two outputs, the second a whole copy)."""
    k2 = k * 2
    cache[:, :, pos] = k2
    return k2, cache


def test_in_place_update_moves_only_the_written_rows():
    g = capture(in_place, *inputs())
    assert g.validation.status == "passed"
    (out,) = [t for t in g.tensors if t.role == "output"]
    assert out.updates == cache_input(g)
    m = graph_metrics(g)
    assert m.macs == 0 and m.boundary_bytes == ROWS + POS + ROWS  # k, pos, the rows written
    r = bound(g, "h100-pcie", cache_aware=True)
    assert r.unfused.bytes == r.fused.bytes == r.cache_aware.bytes == ROWS + POS + ROWS


def test_functionalised_update_returned_is_one_output_in_place():
    g = capture(in_place_no_grad, *inputs())
    assert g.validation.status == "passed"
    outs = [t for t in g.tensors if t.role == "output"]
    assert [t.updates for t in outs] == [None, cache_input(g)] and not [n for n in g.nodes if n.op == "output_copy"]
    m = graph_metrics(g)
    assert m.macs == 0 and m.boundary_bytes == ROWS + POS + ROWS + ROWS  # k, pos, k2 returned, the rows written


def test_functional_index_put_returned_as_a_new_tensor_pays_the_copy():
    g = capture(lambda cache, k, pos: torch.ops.aten.index_put(cache, [None, None, pos], k), *inputs())
    assert g.validation.status == "passed"
    (out,) = [t for t in g.tensors if t.role == "output"]
    assert out.updates is None
    m = graph_metrics(g)
    assert m.macs == 0 and m.boundary_bytes == (CACHE - ROWS) + ROWS + POS + CACHE  # the rest of cache, k, pos, out
    assert bound(g, "h100-pcie", cache_aware=True).cache_aware.bytes == m.boundary_bytes


def test_two_updates_of_one_input_chain_in_place():
    """Two assignments into the cache: the second scatter (one row per head) starts from the first one's
    result (three rows), whose own start is the cache, so the returned cache is still that input's
    memory, and at least the larger write (the three rows: the two may overlap) reaches it."""
    def twice(cache: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        cache[:, :, pos] = k
        cache[:, :, pos[:1] + 3] = -k[:, :, :1]
        return cache

    g = capture(twice, *inputs())
    assert g.validation.status == "passed"
    assert [t.updates for t in g.tensors if t.role == "output"] == [cache_input(g)]
    # k, pos (pos[:1] + 3 and -k[:, :, :1] are made on chip), the larger row set written
    assert graph_metrics(g).boundary_bytes == ROWS + POS + ROWS
    r = bound(g, "h100-pcie", cache_aware=True)
    assert r.fused.bytes == ROWS + POS + ROWS and r.cache_aware.time >= r.fused.time
    # Kernel by kernel the first scatter's rows are the cache's memory, not an intermediate a cache keeps:
    # they reach DRAM (128 B beyond the second scatter's 64), so unfused and cache-aware never go below
    # fused (they went to 280 B: the 192 B rows credited away on chip).
    assert r.unfused.bytes == r.cache_aware.bytes == ROWS + POS + ROWS
    # No residency, by hand: index_put k + pos + rows (192 + 24 + 192), neg 64 + 64, pos[:1] + 3 8 + 8,
    # index_put_1 64 + 8 + 64.
    classic = bound(g, "h100-pcie", residency=False)
    assert classic.unfused.bytes == 408 + 128 + 16 + 136


def test_slice_assignment_into_the_input_moves_the_slice_only():
    """``cache[:, :, 2:5] = k`` (functionalised to slice_scatter of the input): a scatter from the cache
    through a generated position table (0 bytes), in place: k in, the slice (192 B) written."""
    def sliced(cache: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        cache[:, :, 2:5] = k
        return cache

    g = capture(sliced, *inputs())
    assert g.validation.status == "passed"
    assert [t.updates for t in g.tensors if t.role == "output"] == [cache_input(g)]
    assert graph_metrics(g).boundary_bytes == ROWS + ROWS
    fresh = capture(lambda cache, k, pos: torch.slice_scatter(cache, k, dim=2, start=2, end=5), *inputs())
    assert [t.updates for t in fresh.tensors if t.role == "output"] == [None]
    assert graph_metrics(fresh).boundary_bytes == (CACHE - ROWS) + ROWS + CACHE  # a new tensor: the copy


def test_scatter_through_input_indices_records_that_they_are_distinct():
    """``pos`` is an input: its values are not in the file, and the 192 B written count its three positions
    as distinct, so the file says so (printed by ``bound``); the slice assignment's positions are a generated
    table (distinct by construction) and need no assumption."""
    from solar_io.cli.bound import assumption_text

    g = capture(in_place, *inputs())
    (a,) = [a for a in g.assumptions if a.kind == "scatter_indices"]
    (put,) = [n.name for n in g.nodes if n.init is not None]
    pos = [t.name for t in g.tensors if t.dtype == "int64"]
    assert dict(a.values) == {"nodes": (put,), "index_tensors": tuple(pos)}
    assert "scatter_indices: scatter: each index of a scatter names a distinct position" in assumption_text(g)

    def sliced(cache: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        cache[:, :, 2:5] = k
        return cache

    assert not [a for a in capture(sliced, *inputs()).assumptions if a.kind == "scatter_indices"]


def test_input_changed_but_not_returned_is_an_output_updating_it():
    """``cache.index_copy_(2, pos, k); return k * 2``: the cache's new rows are the program's effect on memory,
    so the changed cache is an output after the returned one, updating its input in place, and the eager
    run's cache is compared with it. By hand: k + pos read (192 + 24), the rows written (192), k * 2 (192)."""
    def mutates(cache: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(2, pos, k)
        return k * 2

    g = capture(mutates, *inputs())
    assert g.validation.status == "passed"
    outs = {t.name: t.updates for t in g.tensors if t.role == "output"}
    assert sorted(outs.values(), key=str) == [None, cache_input(g)]
    r = bound(g, "h100-pcie", cache_aware=True)
    assert graph_metrics(g).boundary_bytes == r.unfused.bytes == r.fused.bytes == ROWS + POS + ROWS + ROWS


def _routed(x, ids, w):  # a routed MoE's combine: new memory, scatter-added into twice, and the routing one-hot
    out = torch.zeros(8, 4)
    out.index_add_(0, ids, x)
    out.index_add_(0, ids, w)
    return out * 2, torch.nn.functional.one_hot(ids, 8)


def _aliased(x, ids, w):  # a view taken before the update sees it: only functionalisation is exact
    out = torch.zeros(8, 4)
    head = out[:2]
    out.index_add_(0, ids, x)
    return out * 2, head + 1


def _view_written(x, ids, w):  # new memory updated in place and written into through views (NVFP4's quantisers)
    acc = torch.zeros(8, 4)
    acc.index_add_(0, ids, x)
    out = torch.empty(2, 8, 4)
    out[0] = acc
    out[1] = acc * 2
    return out


@pytest.mark.parametrize("fn, decomposed", [(_routed, False), (_aliased, True), (_view_written, True)])
def test_an_update_of_new_memory_is_lowered_without_decomposing_the_program(monkeypatch, fn, decomposed):
    """``zeros(..).index_add_(..)`` and ``one_hot`` have rules (the combine and routing of every routed MoE
    reference), so the program is not decomposed; with a view of the tensor taken before the update it still
    is. Both validate against eager. By hand: the one-hot is 3 x 8 comparisons against a generated table
    of the 8 classes, and 3 x 4 x 2 scatter-adds."""
    import solar_io.frontends.torch.capture as capture_module

    ran = []
    real = capture_module.decompose
    monkeypatch.setattr(capture_module, "decompose", lambda ep, *a, **k: ran.append(1) or real(ep, *a, **k))
    g = capture(fn, torch.randn(3, 4), torch.tensor([0, 2, 5]), torch.randn(3, 4))
    assert g.validation.status == "passed", g.validation.reason
    assert bool(ran) == decomposed
    if not decomposed:
        m = {n.name: n for n in graph_metrics(g).nodes}
        (eq,) = [n for n in g.nodes if n.op == "aten.one_hot" and n.map == "eq"]
        assert m[eq.name].flops_vector == 3 * 8
        adds = [m[n.name].flops_vector for n in g.nodes if n.op == "aten.index_add"]
        assert adds == [3 * 4, 3 * 4]


def test_a_long_chain_of_updates_of_new_memory_is_walked_without_recursion():
    """A per-token loop of ``out.index_add_`` is a chain of in-place nodes, each on the last one's result:
    2,000 of them (deeper than Python's recursion limit) are all updates of new memory, and a view taken of
    the memory before the chain makes none of them one."""
    from solar_io.frontends.torch.registry import fresh_update_rule

    for viewed in (False, True):
        g = torch.fx.Graph()
        ids, src = g.placeholder("ids"), g.placeholder("src")
        x = g.call_function(torch.ops.aten.zeros.default, ([8, 4],))
        if viewed:
            head = g.call_function(torch.ops.aten.slice.Tensor, (x, 0, 0, 2))
        for _ in range(2000):
            x = g.call_function(torch.ops.aten.index_add_.default, (x, 0, ids, src))
        if viewed:
            g.output((x, head))
        else:
            g.output(x)
        assert (fresh_update_rule(x) is None) == viewed
