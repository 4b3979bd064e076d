"""Outputs handed in prefilled (format 1.8, ``solar_io/prefill.py``): elements the program provably leaves at
the prefilled value are not charged as written.

Hand counts. ``acc = zeros(V=100, D=8) fp32; acc.index_add_(0, ids[S=4], g[S, D])``, then an elementwise chain to
the output. The scatter writes S x D = 32 elements; the output has V x D = 800. Reads: g 4 x 8 fp32 = 128 B,
ids 4 int64 = 32 B; the fill is an immediate (0 B).
"""

from __future__ import annotations

import dataclasses

import pytest

import solar_io
from solar_io import graph_metrics
from solar_io.affine import parse_access
from solar_io.graph import Graph, Node, Tensor
from solar_io.prefill import prefilled_writes

READS = 128 + 32


def _scatter(out: str = "acc") -> Node:
    return Node("add", "einsum", "aten.index_add", (parse_access("zeros[@ids, D]"), parse_access("g[S, D]"),
                                                    parse_access("ids[S]")), (parse_access(f"{out}[@ids, D]"),),
                space=("S", "D"), map="identity", reduce="add", init="zeros")


def _map(name: str, op: str, inputs: tuple[str, ...], out: str) -> Node:
    return Node(name, "einsum", f"aten.{op}", tuple(parse_access(a) for a in inputs), (parse_access(out),),
                space=("V", "D"), map=op, reduce="none")


def embedding_grad(chain: tuple[Node, ...], prefilled: float | None = 0.0, extra: tuple[Tensor, ...] = (),
                   out_dtype: str = "bf16") -> Graph:
    """zeros -> index_add_ -> ``chain`` (each node's output the next one's data operand) -> ``out``."""
    mids = [Tensor(n.outputs[0].tensor, ("V", "D"), "fp32", "intermediate") for n in chain[:-1]]
    return Graph((("V", 100), ("S", 4), ("D", 8)),
                 (Tensor("zeros", ("V", "D"), "fp32", "constant", value=0.0), Tensor("g", ("S", "D"), "fp32", "input"),
                  Tensor("ids", ("S",), "int64", "input"), Tensor("acc", ("V", "D"), "fp32", "intermediate"),
                  *mids, *extra, Tensor("out", ("V", "D"), out_dtype, "output", prefilled=prefilled)),
                 (_scatter(), *chain))


CAST = (_map("cast", "identity", ("acc[V, D]",), "out[V, D]"),)


def test_a_zero_filled_output_is_charged_the_scattered_rows_only():
    g = embedding_grad(CAST)
    assert prefilled_writes(g) == {"out": 32.0}
    m = graph_metrics(g)
    assert m.nodes[1].bytes_written == {"out": 32 * 2.0}
    assert m.boundary_bytes == READS + 64
    r = solar_io.bound(g, "h100-pcie", cache_aware=True)
    assert r.fused.bytes == READS + 64 and r.cache_aware.bytes == READS + 64
    # Fresh memory: written whole (800 bf16), as before 1.8.
    fresh = embedding_grad(CAST, prefilled=None)
    assert prefilled_writes(fresh) == {}
    assert graph_metrics(fresh).boundary_bytes == READS + 1600
    assert solar_io.bound(fresh, "h100-pcie").fused.bytes == READS + 1600


def test_the_chain_must_take_the_fill_to_the_prefilled_value():
    """``out = acc * 2 + 1``: zeros become ones. Handed in zero-filled, every element must be written; handed in
    holding 1.0, only the scattered rows."""
    chain = (_map("scale", "mul", ("acc[V, D]", "two[]"), "t1[V, D]"), _map("shift", "add", ("t1[V, D]", "one[]"),
                                                                             "out[V, D]"))
    consts = (Tensor("two", (), "fp32", "constant", value=2.0), Tensor("one", (), "fp32", "constant", value=1.0))
    assert prefilled_writes(embedding_grad(chain, 0.0, consts, "fp32")) == {}
    assert graph_metrics(embedding_grad(chain, 0.0, consts, "fp32")).boundary_bytes == READS + 3200
    assert prefilled_writes(embedding_grad(chain, 1.0, consts, "fp32")) == {"out": 32.0}
    assert graph_metrics(embedding_grad(chain, 1.0, consts, "fp32")).boundary_bytes == READS + 128


def test_a_stored_operand_keeps_zeros_only_as_a_factor():
    """``acc * w`` (w stored, per element) keeps the zeros (0 times anything finite); ``acc + w`` does not."""
    w = (Tensor("w", ("V", "D"), "fp32", "input"),)
    mul = embedding_grad((_map("scale", "mul", ("acc[V, D]", "w[V, D]"), "out[V, D]"),), 0.0, w, "fp32")
    add = embedding_grad((_map("shift", "add", ("acc[V, D]", "w[V, D]"), "out[V, D]"),), 0.0, w, "fp32")
    assert prefilled_writes(mul) == {"out": 32.0} and prefilled_writes(add) == {}
    # w is read whole either way (3200 B); the product writes 32 fp32 elements, the sum all 800.
    assert graph_metrics(mul).boundary_bytes == READS + 3200 + 128
    assert graph_metrics(add).boundary_bytes == READS + 3200 + 3200


def test_a_scatter_returned_as_the_output_writes_its_rows_in_the_handed_memory():
    """``zeros.index_add_(...)`` returned: a new tensor is written whole (800 fp32); handed in zeroed, its rows."""
    def g(prefilled: float | None) -> Graph:
        return Graph((("V", 100), ("S", 4), ("D", 8)),
                     (Tensor("zeros", ("V", "D"), "fp32", "constant", value=0.0),
                      Tensor("g", ("S", "D"), "fp32", "input"), Tensor("ids", ("S",), "int64", "input"),
                      Tensor("out", ("V", "D"), "fp32", "output", prefilled=prefilled)), (_scatter("out"),))

    assert graph_metrics(g(0.0)).boundary_bytes == READS + 128
    assert graph_metrics(g(None)).boundary_bytes == READS + 3200


def test_a_view_of_the_result_exposes_only_the_scattered_rows():
    """``out = cast(acc).reshape(V * D)``: the output is a view; what it exposes of the cast is the rows."""
    g0 = embedding_grad((_map("cast", "identity", ("acc[V, D]",), "c[V, D]"),), None)
    view = Node("flat", "data_movement", "aten.reshape", (parse_access("c"),), (parse_access("out"),),
                movement="reshape", view=True)
    tensors = tuple(t for t in g0.tensors if t.name != "out") + (Tensor("c", ("V", "D"), "bf16", "intermediate"),
                                                                  Tensor("out", ("VD",), "bf16", "output"))
    g = dataclasses.replace(g0, ranks=g0.ranks + (("VD", 800),), tensors=tensors, nodes=g0.nodes + (view,))
    assert not [i for i in solar_io.validate(g) if i.severity == "error"]
    assert graph_metrics(g).boundary_bytes == READS + 1600
    zeroed = dataclasses.replace(g, tensors=tuple(dataclasses.replace(t, prefilled=0.0) if t.name == "out" else t
                                                  for t in g.tensors))
    assert prefilled_writes(zeroed) == {"out": 32.0, "c": 32.0}
    assert graph_metrics(zeroed).boundary_bytes == READS + 64


@pytest.mark.parametrize("tensor, message", [
    (Tensor("g", ("S", "D"), "fp32", "input", prefilled=0.0), "only an output"),
    (Tensor("out", ("V", "D"), "bf16", "output", prefilled=float("nan")), "finite"),
])
def test_a_misplaced_prefilled_is_an_error(tensor: Tensor, message: str):
    g = embedding_grad(CAST)
    g = dataclasses.replace(g, tensors=tuple(tensor if t.name == tensor.name else t for t in g.tensors))
    (issue,) = [i for i in solar_io.validate(g) if i.severity == "error"]
    assert issue.path[0::2] == ("tensors", "prefilled") and message in issue.message


@pytest.mark.parametrize("edit, message", [
    (("- name: ids\n  ranks: [B]\n  dtype: int64\n  role: input\n",
      "- name: ids\n  ranks: [B]\n  dtype: int64\n  role: input\n  prefilled: 0.0\n"),
     "only an output that updates no input may be prefilled"),
    (("  prefilled: 0.0\n", "  prefilled: .nan\n"), "must be a finite number, got nan"),
])
def test_a_file_with_a_misplaced_prefilled_is_refused_in_one_line(edit: tuple[str, str], message: str):
    """Read from a file (the 1.8 golden, edited), ``prefilled`` on an input or not finite is one GraphError line
    naming the field, as validation names it for a graph built in code."""
    from paths import ROOT

    text = (ROOT / "tests" / "golden" / "v1.8" / "prefilled_scatter.yaml").read_text(encoding="utf-8")
    assert edit[0] in text
    with pytest.raises(solar_io.GraphError, match=r"tensors\[\d\]\.prefilled: .*" + message) as e:
        solar_io.loads(text.replace(edit[0], edit[1], 1))
    assert len(str(e.value).strip().splitlines()) == 1
