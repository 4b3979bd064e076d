"""Views at the graph boundary: outputs that view computed tensors, inputs read through views.

Each case is a matmul ``h[M,N] = x[M,K] @ w[K,N]`` (fp32, M=8, K=4, N=6) with one view; the
expected boundary bytes are derived by hand from the tensor sizes.
"""

from __future__ import annotations

import pytest

from solar_io.affine import parse_access
from solar_io.backends.roofline import bound
from solar_io.graph import Graph, Node, Tensor
from solar_io.hardware import load_spec
from solar_io.metrics import graph_metrics
from solar_io.views import boundary_bytes, exposed_bytes

pytestmark = pytest.mark.filterwarnings("ignore:.*PuLP 4.0:DeprecationWarning")
H100 = load_spec("h100-pcie")
M, K, N = 8, 4, 6
X, W, H = 4 * M * K, 4 * K * N, 4 * M * N  # bytes of x, w and h


def matmul_then(view: Node, out: Tensor, extra_ranks: tuple = ()) -> Graph:
    mm = Node("mm", "einsum", "mm", (parse_access("x[M, K]"), parse_access("w[K, N]")), (parse_access("h[M, N]"),),
              space=("M", "N", "K"), map="mul", reduce="add")
    tensors = (Tensor("x", ("M", "K"), "fp32", "input"), Tensor("w", ("K", "N"), "fp32", "weight"),
               Tensor("h", ("M", "N"), "fp32", "intermediate"), out)
    return Graph(ranks=(("M", M), ("K", K), ("N", N), *extra_ranks), tensors=tensors, nodes=(mm, view))


def test_output_reshaping_an_intermediate_counts_its_write() -> None:
    g = matmul_then(Node("flat", "data_movement", "view", (parse_access("h"),), (parse_access("o"),),
                         movement="reshape", view=True), Tensor("o", ("MN",), "fp32", "output"), (("MN", M * N),))
    assert graph_metrics(g).boundary_bytes == X + W + H  # one derivation: info and bound agree
    assert exposed_bytes(g) == {"h": H}
    r = bound(g, H100, cache_aware=True, capacity=1e30)
    assert r.totals.boundary_bytes == X + W + H
    assert r.fused.bytes == X + W + H and r.fused.memory_time == pytest.approx((X + W + H) / r.dram_bandwidth)
    assert r.fused.time <= r.unfused.time
    assert r.cache_aware.time == pytest.approx(r.fused.time, rel=1e-12)  # unlimited S: as fused, same bytes
    small = bound(g, H100, cache_aware=True, capacity=64)
    assert small.cache.traffic >= X + W + H


def test_output_slicing_an_intermediate_counts_the_slice_only() -> None:
    # o[P, N] = h[P, N] for P < 2: rows 0 and 1 of h; the other rows need never reach DRAM.
    g = matmul_then(Node("rows", "data_movement", "slice", (parse_access("h[P, N]"),), (parse_access("o[P, N]"),),
                         space=("P", "N"), movement="copy", view=True), Tensor("o", ("P", "N"), "fp32", "output"),
                    (("P", 2),))
    assert exposed_bytes(g) == {"h": 4 * 2 * N}
    assert boundary_bytes(g, graph_metrics(g).nodes) == X + W + 4 * 2 * N
    r = bound(g, H100, cache_aware=True, capacity=1e30)
    assert r.totals.boundary_bytes == X + W + 4 * 2 * N and r.cache.traffic == X + W + 4 * 2 * N


def test_broadcast_view_output_exposes_all_of_its_source() -> None:
    # o[M, N, R] = h[M, N]: every element of h appears in o (R = 3 times), so all of h is written:
    # p - c = MNR - MN outputs are lost to sharing, leaving MNR - (MNR - MN) = MN elements.
    g = matmul_then(Node("bcast", "data_movement", "expand", (parse_access("h[M, N]"),),
                         (parse_access("o[M, N, R]"),), space=("M", "N", "R"), movement="copy", view=True),
                    Tensor("o", ("M", "N", "R"), "fp32", "output"), (("R", 3),))
    assert exposed_bytes(g) == {"h": H}
    assert bound(g, H100).totals.boundary_bytes == X + W + H


def test_chain_walk_never_overcounts() -> None:
    # o = (h broadcast to [M, N, R])[:, :, 0]: all of h is exposed (MN elements), but the walk only
    # knows counts: the select keeps MN, the broadcast may lose MNR - MN of them: max(0, MN - 2MN) = 0.
    # The bound charges 0 <= MN: loose, never above the truth.
    mm = matmul_then(Node("bcast", "data_movement", "expand", (parse_access("h[M, N]"),),
                          (parse_access("b[M, N, R]"),), space=("M", "N", "R"), movement="copy", view=True),
                     Tensor("b", ("M", "N", "R"), "fp32", "intermediate"), (("R", 3),))
    sel = Node("sel", "data_movement", "select", (parse_access("b[M, N, 0]"),), (parse_access("o[M, N]"),),
               space=("M", "N"), movement="copy", view=True)
    g = Graph(ranks=mm.ranks, tensors=(*mm.tensors, Tensor("o", ("M", "N"), "fp32", "output")),
              nodes=(*mm.nodes, sel))
    assert exposed_bytes(g) == {}
    assert X + W <= bound(g, H100).totals.boundary_bytes <= X + W + H


def test_input_read_through_a_permute_view_is_at_the_boundary() -> None:
    mm = Node("mm", "einsum", "mm", (parse_access("xt[K, M]"), parse_access("w[K, N]")), (parse_access("h[M, N]"),),
              space=("M", "N", "K"), map="mul", reduce="add")
    tr = Node("t", "data_movement", "permute", (parse_access("x[M, K]"),), (parse_access("xt[K, M]"),),
              space=("K", "M"), movement="copy", view=True)
    g = Graph(ranks=(("M", M), ("K", K), ("N", N)),
              tensors=(Tensor("x", ("M", "K"), "fp32", "input"), Tensor("xt", ("K", "M"), "fp32", "intermediate"),
                       Tensor("w", ("K", "N"), "fp32", "weight"), Tensor("h", ("M", "N"), "fp32", "output")),
              nodes=(tr, mm))
    assert graph_metrics(g).boundary_bytes == X + W + H  # x, read only through the view, still counts
    r = bound(g, H100, cache_aware=True, capacity=1e30)
    assert r.totals.boundary_bytes == X + W + H
    assert r.fused.time <= r.unfused.time
    assert r.cache_aware.time == pytest.approx(r.fused.time, rel=1e-12)


def test_einsum_reading_a_broadcast_view_is_charged_its_root() -> None:
    # y[M, N] = x[M, N] + bb[M, N], bb a broadcast view of the bias b[N]: a kernel reads b (N
    # elements), not M copies. Fused and cache-aware both charge x + b + y = 4 (2MN + N) bytes;
    # the tiling model, which would charge bb's tiles, leaves the node untiled.
    bc = Node("bc", "data_movement", "expand", (parse_access("b[N]"),), (parse_access("bb[M, N]"),),
              space=("M", "N"), movement="copy", view=True)
    add = Node("add", "einsum", "add", (parse_access("x[M, N]"), parse_access("bb[M, N]")), (parse_access("y[M, N]"),),
               space=("M", "N"), map="add", reduce="none")
    g = Graph(ranks=(("M", M), ("N", N)),
              tensors=(Tensor("x", ("M", "N"), "fp32", "input"), Tensor("b", ("N",), "fp32", "weight"),
                       Tensor("bb", ("M", "N"), "fp32", "intermediate"), Tensor("y", ("M", "N"), "fp32", "output")),
              nodes=(bc, add))
    want = 4 * (2 * M * N + N)
    for cap in (64, 1e30):
        r = bound(g, H100, cache_aware=True, capacity=cap)
        assert r.totals.boundary_bytes == want
        assert r.cache.traffic == want and r.cache.groups[-1].kind in ("untiled", "resident")
    assert graph_metrics(g).nodes[1].bytes == 4 * 3 * M * N  # metrics charge the view's elements
