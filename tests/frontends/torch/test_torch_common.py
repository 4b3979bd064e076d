"""The frontend-independent parts: rank naming and graph building, output comparison, folders.

(Named test_torch_* with the torch frontend's tests; nothing here imports torch.)
"""

from __future__ import annotations

import numpy as np
import pytest

from solar_io import dumps, execute, loads, validate
from solar_io.frontends.common.builder import GraphBuilder, access, family
from solar_io.frontends.common.validation import compare, graph_bytes, skipped, tolerance


def test_rank_families_reuse_sizes_and_stay_distinct() -> None:
    b = GraphBuilder()
    assert b.rank("D", 64) == "D"
    assert b.rank("D", 64) == "D"  # same size: same rank
    assert b.rank("D", 128) == "D2"  # other size: next name of the family
    assert b.rank("D", 64, avoid={"D"}) == "D3"  # a second independent dim of size 64
    assert b.rank("D2", 128) == "D2"
    assert b.rank("D7", 64) == "D"  # a hint's family is its name without digits
    assert family("KH2") == "KH" and family("E") == "E"
    assert b.distinct(["D", "D", "D2"]) == ("D", "D3", "D2")
    assert b.rank("9x", 3) == "R9x"  # not an identifier: made one


def test_bind_honours_exact_names_before_families() -> None:
    b = GraphBuilder()
    x = b.tensor("x", b.new_ranks(["B", "S", "D"], [2, 8, 64]), "fp32", "input")
    w = b.source("w", (64, 64), "fp32", "weight")
    assert b.bind(w, ["D*", "D"]) == ("D2", "D")
    assert b.bind(w, ["E", "F"]) == ("D2", "D")  # bound once
    assert b.ranks(x) == ("B", "S", "D")


def test_build_drops_dead_nodes_and_copies_source_outputs() -> None:
    b = GraphBuilder()
    r = b.new_ranks(["B", "D"], [2, 3])
    x = b.tensor("x", r, "fp32", "input")
    unused = b.source("unused", (4,), "fp32", "weight")
    y = b.tensor("y", r, "fp32")
    b.einsum("y", "aten.relu", r, [access(x, r)], access(y, r), "relu")
    dead = b.tensor("dead", r, "fp32")
    b.einsum("dead", "aten.neg", r, [access(x, r)], access(dead, r), "neg")
    g = b.build([y, x], name="t")
    assert [n.name for n in g.nodes] == ["y", "x.out"]
    assert {t.name for t in g.tensors} == {"x", "y", "x.out"}
    assert b.output_names == ["y", "x.out"]
    assert not [i for i in validate(g) if i.severity == "error"]
    assert loads(dumps(g)) == g
    out = execute(g, {"x": np.array([[-1.0, 2.0, 3.0], [4.0, -5.0, 6.0]])})
    assert out["y"].tolist() == [[0.0, 2.0, 3.0], [4.0, 0.0, 6.0]]
    assert unused not in g.tensor_map


def test_unique_names_are_valid() -> None:
    b = GraphBuilder()
    assert b.unique_name("a b") == "a_b"
    b.tensor("a_b", (), "fp32", "constant", 1.0)
    assert b.unique_name("a b") == "a_b_2"
    assert b.unique_name("1x") == "t_1x"


def test_compare_tolerances_and_record() -> None:
    b = GraphBuilder()
    r = b.new_ranks(["B"], [4])
    x = b.tensor("x", r, "fp32", "input")
    y = b.tensor("y", r, "fp32")
    i = b.tensor("i", (), "int64")
    b.einsum("y", "aten.exp", r, [access(x, r)], access(y, r), "exp")
    b.einsum("i", "aten.argmax", r, [access(y, r)], access(i, []), "identity", "argmax")
    g = b.build([y, i])
    ref = {"y": np.array([1.0, 2.0, 3.0, 1000.0]), "i": np.array(3)}
    v, bad = compare(g, ref, ref, reference="test", seed=0)
    assert v.status == "passed" and not bad and v.max_abs_error == 0.0 and v.rtol == tolerance("fp32")[0]
    got = dict(ref, y=ref["y"] + np.array([0.0, 0.0, 0.0, 0.05]))  # 5e-5 of the scale: within atol
    assert compare(g, got, ref, reference="test", seed=0)[0].status == "passed"
    got = dict(ref, y=ref["y"] + np.array([0.5, 0.0, 0.0, 0.0]))
    v, bad = compare(g, got, ref, reference="test", seed=0)
    assert v.status == "failed" and bad[0].tensor == "y" and "max abs error 0.5" in (v.reason or "")
    v, _ = compare(g, dict(ref, i=np.array(2)), ref, reference="test", seed=0)
    assert v.status == "failed"
    assert tolerance("int8") == (0.0, 0.0) and tolerance("bf16")[0] > tolerance("fp32")[0]
    assert graph_bytes(g) == 4 * 4 + 4 * 4 + 8  # x, y (an output: kept) and i
    assert skipped("why").status == "skipped"


@pytest.mark.parametrize("special", [np.inf, -np.inf, np.nan])
def test_compare_matches_special_values(special: float) -> None:
    b = GraphBuilder()
    r = b.new_ranks(["B"], [2])
    x = b.tensor("x", r, "fp32", "input")
    y = b.tensor("y", r, "fp32")
    b.einsum("y", "aten.neg", r, [access(x, r)], access(y, r), "neg")
    g = b.build([y])
    ref = {"y": np.array([special, 1.0])}
    assert compare(g, ref, ref, reference="t", seed=None)[0].status == "passed"
    assert compare(g, {"y": np.array([0.0, 1.0])}, ref, reference="t", seed=None)[0].status == "failed"
