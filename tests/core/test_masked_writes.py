"""Masked writes (``x[mask] = v`` through a mask whose values the file does not hold): the nodes an
assumption lists under ``masked_writes`` are charged the least any selection costs
(solar_io.metrics), and the list is kept to the graph's nodes.

Hand counts, M=64, N=32 (2,048 elements): ``h = x * 2`` (fp32) then ``h[mask] = 7`` in place,
``y = h + 1``. Eager's ``index_put_`` reads the bool mask (2,048 B) and writes the selected elements
of ``h`` in its memory, 0 to 8,192 B: the fill's least cost is 2,048 B. Without the list, the same
``where(mask, 7, h)`` is an elementwise node: 2,048 + 8,192 read + 8,192 written = 18,432 B.
"""

from __future__ import annotations

from dataclasses import replace

from solar_io import graph_metrics, loads, validate
from solar_io.format.yamltext import emit
from solar_io.graph import Assumption
from solar_io.node_lists import MASKED_WRITES, with_listed_nodes

M, N = 64, 32
E = M * N


def masked(listed: tuple[str, ...] | None = ("fill",)):
    doc = {
        "format": "solar-io.einsum-graph", "version": "1.5", "name": "fill",
        "producer": {"tool": "solar-io", "tool_version": "0.1.0", "frontend": "hand-written"},
        "ranks": {"M": M, "N": N},
        "tensors": [{"name": "x", "ranks": ["M", "N"], "dtype": "fp32", "role": "input"},
                    {"name": "mask", "ranks": ["M", "N"], "dtype": "bool", "role": "input"},
                    {"name": "two", "ranks": [], "dtype": "fp32", "role": "constant", "value": 2.0},
                    {"name": "seven", "ranks": [], "dtype": "fp32", "role": "constant", "value": 7.0},
                    {"name": "one", "ranks": [], "dtype": "fp32", "role": "constant", "value": 1.0},
                    {"name": "h", "ranks": ["M", "N"], "dtype": "fp32", "role": "intermediate"},
                    {"name": "f", "ranks": ["M", "N"], "dtype": "fp32", "role": "intermediate"},
                    {"name": "y", "ranks": ["M", "N"], "dtype": "fp32", "role": "output"}],
        "nodes": [
            {"name": "scale", "kind": "einsum", "op": "aten.mul", "space": ["M", "N"], "inputs": ["x[M, N]", "two[]"],
             "output": "h[M, N]", "map": "mul", "reduce": "none"},
            {"name": "fill", "kind": "einsum", "op": "aten.index_put", "space": ["M", "N"],
             "inputs": ["mask[M, N]", "seven[]", "h[M, N]"], "output": "f[M, N]", "map": "where", "reduce": "none"},
            {"name": "add", "kind": "einsum", "op": "aten.add", "space": ["M", "N"], "inputs": ["f[M, N]", "one[]"],
             "output": "y[M, N]", "map": "add", "reduce": "none"}],
        "validation": {"status": "skipped", "method": "none"}}
    if listed is not None:
        doc["assumptions"] = [{"kind": "masked_fill", "subject": "aten.index_put with a boolean mask",
                               "detail": "hand-written", "values": {MASKED_WRITES: list(listed)}}]
    return loads(emit(doc))


def test_a_listed_fill_is_charged_its_mask_only():
    fill = {m.name: m for m in graph_metrics(masked()).nodes}["fill"]
    assert fill.bytes_read == {"mask": E} and fill.bytes_written == {"f": 0.0}
    assert (fill.macs, fill.flops, fill.transcendental) == (0, 0.0, 0.0)
    plain = {m.name: m for m in graph_metrics(masked(listed=None)).nodes}["fill"]
    assert plain.bytes == E + 2 * 4 * E and plain.flops_vector == E  # the elementwise where, every element


def test_the_bounds_keep_the_tensors_around_the_fill():
    """The fill drops its read and write of h only: the add reads f, which is h's memory, so on chip it is
    a re-read of what scale wrote (as for a scatter's init), never a first touch from DRAM."""
    from solar_io.backends import bound

    g, plain = masked(), masked(listed=None)
    assert {m.name: m.bytes for m in graph_metrics(g).nodes} == {"scale": 2 * 4 * E, "fill": E, "add": 2 * 4 * E}
    # one byte on chip: scale reads x (8,192 B) and writes h (8,192 B less the byte kept), the fill reads its
    # mask (2,048 B), the add re-reads h (8,192 B less the byte) and delivers y (8,192 B)
    r, r0 = (bound(x, "h100-sxm", capacity=1.0) for x in (g, plain))
    bw = r.dram_bandwidth
    assert round(r.unfused.memory_time * bw) == 4 * E + (4 * E - 1) + E + (4 * E - 1) + 4 * E
    assert r.unfused.memory_time < r0.unfused.memory_time  # the elementwise where also moves h and f
    # with the chip's own on-chip memory every tensor here stays on chip: both are first touches and y
    big, big0 = (bound(x, "h100-sxm", cache_aware=True) for x in (g, plain))
    assert round(big.unfused.memory_time * bw) == 4 * E + E + 4 * E == round(big0.unfused.memory_time * bw)
    assert big.fused.memory_time == big0.fused.memory_time
    assert big.cache_aware.memory_time <= big0.cache_aware.memory_time


def test_listed_nodes_must_be_graph_nodes_and_are_kept_to_them():
    g = masked()
    stray = replace(g, assumptions=(Assumption("masked_fill", "s", "d", ((MASKED_WRITES, ("fill", "gone")),)),))
    assert [i.message for i in validate(stray) if "masked-write" in i.message] == [
        "masked-write node 'gone' is not a graph node"]
    kept = with_listed_nodes(stray)
    assert kept.assumptions[0].values == ((MASKED_WRITES, ("fill",)),) and not validate(kept)
    assert with_listed_nodes(g) is g
