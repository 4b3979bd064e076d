"""The chain-tiling staircase (:class:`ChainFront`): one enumeration of a chain's residency choices
answers every capacity exactly as :func:`solve_chain` does at that capacity, so a second chip of
another on-chip size reuses the first one's chain work (issue 19)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tiling_scale import layers

from solar_io.backends.tiling.fusion import (
    ENUMERATE_LIMIT,
    ChainOption,
    chain_front,
    chain_options,
    graph_view,
    solve_chain,
)
from solar_io.metrics import graph_metrics

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")


def _key(ct):  # noqa: ANN001, ANN202
    return None if ct is None else (ct.traffic, ct.rank, ct.tile, ct.resident, ct.streamed, ct.working_set,
                                    ct.option, ct.resident_idx)


def _capacities(opts: list[ChainOption]) -> list[float]:
    """Every working set an answer can change at, just below and above it, and the extremes."""
    points = {0.0, 1e30}
    for o in opts:
        for extra in (0.0, *(b for _, b in o.others), sum(b for _, b in o.others)):
            w = o.tile_ws + extra
            points.update({w, w * (1 - 1e-9), w * (1 + 1e-9), w + 1.0})
    return sorted(points)


sizes = st.sampled_from([8.0, 16.0, 24.0, 64.0])  # few sizes: equal-size tensors and ties in traffic
options = st.builds(
    ChainOption,
    st.sampled_from(["B", "S"]), st.integers(1, 8), st.sampled_from([1.0, 2.0, 3.5, 8.0]),
    st.sampled_from([0.0, 10.0, 40.0]), st.sampled_from([4.0, 12.0, 30.0]),
    st.lists(st.tuples(st.sampled_from(["w0", "w1", "w2", "w3"]), sizes), max_size=4, unique_by=lambda t: t[0])
    .map(tuple))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(options, min_size=1, max_size=5))
def test_front_equals_the_enumeration_at_every_capacity(opts: list[ChainOption]) -> None:
    front = chain_front(opts)
    assert front is not None
    for cap in _capacities(opts):
        assert _key(front.at(cap)) == _key(solve_chain(opts, cap, method="enumerate")), cap
        assert _key(front.at(cap)) == _key(solve_chain(opts, cap)), cap


def test_front_on_a_layer_graph_equals_the_solve_at_every_capacity() -> None:
    g = layers(3)
    view = graph_view(g, graph_metrics(g))
    checked = 0
    for i, j in [(4, 6), (0, 2), (0, 4), (1, 4), (6, 10)]:
        opts = chain_options(g, view, i, j)
        front = chain_front(opts)
        if not opts:
            assert front is None
            continue
        assert front is not None
        for cap in _capacities(opts):
            assert _key(front.at(cap)) == _key(solve_chain(opts, cap)), (i, j, cap)
            checked += 1
    assert checked > 100


def test_no_front_where_the_solver_would_not_enumerate() -> None:
    many = tuple((f"w{k}", 8.0 * (k + 1)) for k in range(13))  # 2**13 choices > ENUMERATE_LIMIT
    assert 2 ** len(many) > ENUMERATE_LIMIT
    assert chain_front([ChainOption("S", 1, 2.0, 0.0, 4.0, many)]) is None
    assert chain_front([]) is None
