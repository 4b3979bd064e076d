"""Scatters and gathers through an immediate index (a constant of one repeated value) touch one position.

Hand counts (fp32): ``out[@i, D] = src[S, D]`` with S = 3 source rows, D = 4, into T = 8 rows, ``i`` the
immediate 0: every source row lands on row 0, so one row (16 B) is written, not three (48 B); a combining
scatter (reduce add) reads the init at that row only (16 B). A gather ``y[S, D] = x[@i, D]`` reads one
row of x (16 B) and writes all of y (48 B).
"""

from __future__ import annotations

from solar_io import graph_metrics
from solar_io.affine import parse_access
from solar_io.graph import Graph, Node, Tensor

RANKS = (("T", 8), ("S", 3), ("D", 4))


def scatter(reduce: str, index: Tensor) -> Graph:
    return Graph(RANKS, (Tensor("x", ("T", "D"), "fp32", "input"), Tensor("src", ("S", "D"), "fp32", "input"),
                         index, Tensor("y", ("T", "D"), "fp32", "output", updates="x")),
                 (Node("put", "einsum", "aten.index_put", (parse_access("x[@i, D]"), parse_access("src[S, D]"),
                                                           parse_access("i[S]")),
                       (parse_access("y[@i, D]"),), space=("S", "D"), map="identity", reduce=reduce, init="x"),))


def test_scatter_through_an_immediate_index_writes_one_row():
    for reduce, init_read in (("none", 0.0), ("add", 16.0)):
        m = graph_metrics(scatter(reduce, Tensor("i", ("S",), "int64", "constant", value=0.0)))
        (node,) = m.nodes
        assert node.bytes_written == {"y": 16.0}
        assert node.bytes_read == {"x": init_read, "src": 48.0, "i": 0.0}
        assert m.boundary_bytes == 48.0 + init_read + 16.0
    # Stored indices (values not in the file) are taken as distinct: three rows.
    m = graph_metrics(scatter("none", Tensor("i", ("S",), "int64", "input")))
    assert m.nodes[0].bytes_written == {"y": 48.0}


def test_gather_through_an_immediate_index_reads_one_row():
    g = Graph(RANKS, (Tensor("x", ("T", "D"), "fp32", "input"), Tensor("i", ("S",), "int64", "constant", value=0.0),
                      Tensor("y", ("S", "D"), "fp32", "output")),
              (Node("take", "einsum", "aten.index", (parse_access("x[@i, D]"), parse_access("i[S]")),
                    (parse_access("y[S, D]"),), space=("S", "D"), map="identity", reduce="none"),))
    (node,) = graph_metrics(g).nodes
    assert node.bytes_read == {"x": 16.0, "i": 0.0} and node.bytes_written == {"y": 48.0}


def test_an_output_viewing_a_scatter_result_is_a_new_tensor():
    """``out`` a view of ``t0 = init.index_put([i], src)`` (T = 4, two fp32 rows, int64 i): the program
    returns all of t0, a new tensor: written whole (16 B), init copied where not overwritten (2 x 4 B),
    src (8 B) and i (16 B) read: 48 B at every fidelity (unfused had 32 B, the scatter's own 8 B written,
    below the fused boundary's 40 B)."""
    from solar_io.backends.roofline import bound

    g = Graph((("T", 4), ("S", 2)),
              (Tensor("src", ("S",), "fp32", "input"), Tensor("i", ("S",), "int64", "input"),
               Tensor("init", ("T",), "fp32", "input"), Tensor("t0", ("T",), "fp32", "intermediate"),
               Tensor("out", ("T",), "fp32", "output")),
              (Node("put", "einsum", "aten.index_put", (parse_access("init[@i]"), parse_access("src[S]"),
                                                        parse_access("i[S]")), (parse_access("t0[@i]"),),
                    space=("S",), map="identity", reduce="none", init="init"),
               Node("v", "data_movement", "aten.view", (parse_access("t0[T]"),), (parse_access("out[T]"),),
                    space=("T",), movement="copy", view=True)))
    m = graph_metrics(g)
    assert m.nodes[0].bytes_written == {"t0": 16.0} and m.nodes[0].bytes_read["init"] == 8.0
    r = bound(g, "b200", capacity=1e30)
    assert m.boundary_bytes == r.fused.bytes == r.unfused.bytes == 48.0


def test_a_scatter_into_a_fill_reads_no_fill():
    """``y = zeros(T, D).index_add(0, i, src).to(bf16)`` (T = 8, D = 4, S = 3; L1/087 of SOL-ExecBench):
    the zeros are a fill, so a fused kernel reads nothing of them where the scatter did not write. The
    boundary is src (48 B), i (3 x 8 B) and y in bf16 (64 B): 136 B. It was 216 B (the 80 B of the table
    the scatter misses charged as a read of the fill), above the unfused bound's bytes."""
    from solar_io.backends.roofline import bound

    g = Graph(RANKS, (Tensor("zeros", ("T", "D"), "fp32", "constant", value=0.0),
                      Tensor("src", ("S", "D"), "fp32", "input"), Tensor("i", ("S",), "int64", "input"),
                      Tensor("t0", ("T", "D"), "fp32", "intermediate"), Tensor("y", ("T", "D"), "bf16", "output")),
              (Node("add", "einsum", "aten.index_add", (parse_access("zeros[@i, D]"), parse_access("src[S, D]"),
                                                        parse_access("i[S]")),
                    (parse_access("t0[@i, D]"),), space=("S", "D"), map="identity", reduce="add", init="zeros"),
               Node("cast", "einsum", "aten._to_copy", (parse_access("t0[T, D]"),), (parse_access("y[T, D]"),),
                    space=("T", "D"), map="identity", reduce="none")))
    r = bound(g, "b200", capacity=1e30)
    assert graph_metrics(g).boundary_bytes == r.fused.bytes == 136.0
    assert r.fused.bytes <= r.unfused.bytes
