"""Contraction reordering: chain detection, hand-derived costs of every order, the exhaustive
optimum against opt_einsum's optimal path, and the --apply round trip checked against numpy."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import opt_einsum
import pytest
from conftest import ROOT, run_cli
from hypothesis import given, seed, settings
from hypothesis import strategies as st

import solar_io
from solar_io.cli.main import main
from solar_io.dse import reorder_apply
from solar_io.dse.reorder import ChainCosting, ReorderError, all_orders, analyse, analyse_chain, canonical, path_tree
from solar_io.dse.reorder_apply import apply, check, random_inputs
from solar_io.dse.reorder_chains import find_chains
from solar_io.graph import Graph, Node, Tensor

MLA = ROOT / "examples" / "graphs" / "mla_decode_naive.yaml"


def mm(name: str, inputs: list[str], output: str, space: str) -> Node:
    return Node(name, "einsum", "test.einsum", tuple(solar_io.parse_access(a) for a in inputs),
                (solar_io.parse_access(output),), space=tuple(space.split()), map="mul", reduce="add")


def graph(ranks: dict[str, int], tensors: list[tuple[str, str, str]], nodes: list[Node],
          dtype: str = "fp32") -> Graph:
    g = Graph(tuple(ranks.items()), tuple(Tensor(n, tuple(r.split()), dtype, role) for n, r, role in tensors),
              tuple(nodes), name="t")
    assert not [i for i in solar_io.validate(g) if i.severity == "error"], solar_io.validate(g)
    return g


def chain3() -> Graph:
    """D[i,l] = A[i,j] B[j,k] C[k,l], written A*(B*C); i=10 j=20 k=5 l=30."""
    return graph({"i": 10, "j": 20, "k": 5, "l": 30},
                 [("A", "i j", "input"), ("B", "j k", "weight"), ("C", "k l", "weight"),
                  ("BC", "j l", "intermediate"), ("D", "i l", "output")],
                 [mm("bc", ["B[j, k]", "C[k, l]"], "BC[j, l]", "j l k"),
                  mm("abc", ["A[i, j]", "BC[j, l]"], "D[i, l]", "i l j")])


def chain4() -> Graph:
    """D[i,m] = A[i,j] B[j,k] C[k,l] E[l,m], written A*(B*(C*E)); i=2 j=3 k=5 l=7 m=11."""
    return graph({"i": 2, "j": 3, "k": 5, "l": 7, "m": 11},
                 [("A", "i j", "input"), ("B", "j k", "weight"), ("C", "k l", "weight"), ("E", "l m", "weight"),
                  ("CE", "k m", "intermediate"), ("BCE", "j m", "intermediate"), ("D", "i m", "output")],
                 [mm("ce", ["C[k, l]", "E[l, m]"], "CE[k, m]", "k m l"),
                  mm("bce", ["B[j, k]", "CE[k, m]"], "BCE[j, m]", "j m k"),
                  mm("abce", ["A[i, j]", "BCE[j, m]"], "D[i, m]", "i m j")])


def by_order(report) -> dict:
    return {canonical(o.order): o for o in report.orders}


# ---------------------------------------------------------------------------- hand-derived costs


def test_three_operand_chain_costs_by_hand():
    """Operands A=0, B=1, C=2; fp32 = 4 bytes; a pairwise step over the union U of its labels has |U|
    points, 2|U| FLOPs if it sums a label (MACs = |U|), else |U| (an outer product, vector FLOPs).

    ((A*B)*C): A*B -> AB[i,k]: ijk = 10*20*5 = 1000 MACs; bytes (A 200 + B 100 + AB 50) * 4 = 1400.
               AB*C -> D[i,l]: ikl = 10*5*30 = 1500 MACs; bytes (AB 50 + C 150 + D 300) * 4 = 2000.
               total 2500 MACs, 5000 FLOPs, 3400 bytes.
    (A*(B*C)) (written): B*C -> BC[j,l]: jkl = 3000; bytes (100 + 150 + 600) * 4 = 3400.
               A*BC -> D: ijl = 6000; bytes (200 + 600 + 300) * 4 = 4400. total 9000, 18000, 7800.
    ((A*C)*B): A*C shares no label and B needs j and k, the output i and l -> AC[i,j,k,l]:
               ijkl = 30000 points, no sum: 0 MACs, 30000 FLOPs; bytes (200 + 150 + 30000) * 4 = 121400.
               AC*B -> D: 30000 MACs, 60000 FLOPs; bytes (30000 + 100 + 300) * 4 = 121600.
               total 30000 MACs, 90000 FLOPs, 243000 bytes.
    """
    g = chain3()
    (c,) = find_chains(g)
    assert [o.tensor for o in c.operands] == ["A", "B", "C"] and c.written == (0, (1, 2))
    r = analyse_chain(g, c)
    got = {t: (o.macs, o.flops, o.bytes) for t, o in by_order(r).items()}
    assert got == {((0, 1), 2): (2500, 5000, 3400), (0, (1, 2)): (9000, 18000, 7800),
                   ((0, 2), 1): (30000, 90000, 243000)}
    assert r.written.written and r.written.text == "(A*(B*C))"
    assert r.best.text == "((A*B)*C)" and r.worst.text == "((A*C)*B)"
    assert r.gain("flops") == pytest.approx(18000 / 5000) and r.gain("bytes") == pytest.approx(7800 / 3400)
    assert r.improves
    # The written order's cost is the graph's own count of its two nodes.
    m = solar_io.graph_metrics(g)
    assert (r.written.macs, r.written.flops, r.written.bytes) == (m.macs, m.flops, m.bytes)


# Operands A=0, B=1, C=2, E=3; sizes i=2 j=3 k=5 l=7 m=11; output D[i,m]. An intermediate keeps the
# labels an operand outside it or the output needs: AB{i,k} AC{i,j,k,l} AE{i,j,l,m} BC{j,l}
# BE{j,k,l,m} CE{k,m}; ABC{i,l} ABE{i,k,l,m} ACE{i,j,k,m} BCE{j,m}. FLOPs of a step over union U:
# 2|U| if it sums a label, else |U|.
#   pairs:   AB ijk=30 ->60 | AC ijkl=210 (outer) ->210 | AE ijlm=462 (outer) ->462 | BC jkl=105 ->210
#            BE jklm=1155 (outer) ->1155 | CE klm=385 ->770
#   triples: AB+C ikl=70 ->140 | AB+E iklm=770 (keeps all) ->770 | AC+B ijkl=210 ->420
#            AC+E ijklm=2310 ->4620 | AE+B 2310 ->4620 | AE+C 2310 ->4620 | BC+A ijl=42 ->84
#            BC+E jlm=231 ->462 | BE+A 2310 ->4620 | BE+C jklm=1155 ->2310 | CE+A ijkm=330 (keeps all) ->330
#            CE+B jkm=165 ->330
#   last:    ABC+E ilm=154 ->308 | ABE+C iklm=770 ->1540 | ACE+B ijkm=330 ->660 | BCE+A ijm=66 ->132
#            AB+CE ikm=110 ->220 | AC+BE ijklm=2310 ->4620 | AE+BC ijlm=462 ->924
FOUR_OPERAND_FLOPS = {
    (((0, 1), 2), 3): 60 + 140 + 308,     # 508, the best
    (((0, 1), 3), 2): 60 + 770 + 1540,    # 2370
    (((0, 2), 1), 3): 210 + 420 + 308,    # 938
    (((0, 2), 3), 1): 210 + 4620 + 660,   # 5490
    (((0, 3), 1), 2): 462 + 4620 + 1540,  # 6622
    (((0, 3), 2), 1): 462 + 4620 + 660,   # 5742
    ((0, (1, 2)), 3): 210 + 84 + 308,     # 602
    (0, ((1, 2), 3)): 210 + 462 + 132,    # 804
    ((0, (1, 3)), 2): 1155 + 4620 + 1540,  # 7315, the worst
    (0, ((1, 3), 2)): 1155 + 2310 + 132,  # 3597
    ((0, (2, 3)), 1): 770 + 330 + 660,    # 1760
    (0, (1, (2, 3))): 770 + 330 + 132,    # 1232, the written order
    ((0, 1), (2, 3)): 60 + 770 + 220,     # 1050
    ((0, 2), (1, 3)): 210 + 1155 + 4620,  # 5985
    ((0, 3), (1, 2)): 462 + 210 + 924,    # 1596
}


def test_four_operand_chain_flops_of_every_order_by_hand():
    g = chain4()
    (r,) = analyse(g)
    got = {t: o.flops for t, o in by_order(r).items()}
    assert got == {canonical(t): f for t, f in FOUR_OPERAND_FLOPS.items()}
    assert r.method == "exhaustive" and len(r.orders) == 15
    assert r.best.text == "(((A*B)*C)*E)" and r.best.flops == 508
    assert r.worst.flops == 7315 and r.written.flops == 1232 and r.written.written
    assert r.gain("flops") == pytest.approx(1232 / 508)


def test_number_of_orders_is_the_double_factorial():
    assert [len(all_orders(n)) for n in range(1, 7)] == [1, 1, 3, 15, 105, 945]
    assert len({canonical(t) for t in all_orders(5)}) == 105


# ---------------------------------------------------------------------------- exhaustive vs opt_einsum

LABELS = "abcdefg"


@st.composite
def einsums(draw):
    """A random einsum of 3..6 operands with distinct label sets: sizes, operand labels, output labels."""
    n = draw(st.integers(3, 6))
    labels = LABELS[:draw(st.integers(3, len(LABELS)))]  # 3 labels give 7 distinct sets of 1..3
    sizes = {a: draw(st.integers(2, 7)) for a in labels}
    ops = draw(st.lists(st.lists(st.sampled_from(labels), min_size=1, max_size=3, unique=True), min_size=n,
                        max_size=n, unique_by=frozenset))
    used = sorted({a for o in ops for a in o})
    out = draw(st.lists(st.sampled_from(used), max_size=3, unique=True))
    # opt_einsum pre-sums a label that only one operand carries; keep such labels in the output so
    # that every summed label is shared and opt_einsum's cost model is the one of metrics.
    out += [a for a in used if sum(a in o for o in ops) == 1 and a not in out]
    return sizes, ops, out


def one_node_graph(sizes: dict[str, int], ops: list[list[str]], out: list[str]) -> Graph:
    used = sorted({a for o in ops for a in o})
    tensors = [(f"x{i}", " ".join(o), "input") for i, o in enumerate(ops)] + [("y", " ".join(out), "output")]
    node = mm("all", [f"x{i}[{', '.join(o)}]" for i, o in enumerate(ops)], f"y[{', '.join(out)}]",
              " ".join(out + [a for a in used if a not in out]))
    return graph({a: sizes[a] for a in used}, tensors, [node])


@seed(20261129)
@settings(max_examples=60, deadline=None, derandomize=True)
@given(einsums())
def test_exhaustive_optimum_equals_opt_einsum_search(case):
    """The brute-force optimum against opt_einsum, which searches independently of this code.

    - Dynamic programming over subsets (``DynamicProgramming(search_outer=True)``) is exact for the sum
      over pairwise steps of |U| (the points of each step: MACs + vector FLOPs of a pairwise order):
      the two optima are equal.
    - ``optimize="optimal"`` reports 2|U| per step that sums a label and |U| otherwise: the FLOPs of
      metrics. Its search is not always exact (it caches a step's result by the two label sets only),
      so the enumerated optimum is never above its cost, and often equal. Counterexample checked by
      hand: efa,fe,e,bda->dbf (a=6 b=4 d=4 e=5 f=4): ((efa*(fe*e))*bda) costs fe*e 20 (no sum) +
      efa*ef 2*120 + af*bda 2*384 = 1028 FLOPs; opt_einsum's "optimal" path costs 1128.
    """
    sizes, ops, out = case
    g = one_node_graph(sizes, ops, out)
    (c,) = find_chains(g)
    r = analyse_chain(g, c)
    pairwise = [o for o in r.orders if o.steps == len(ops) - 1]
    assert len(pairwise) == len(all_orders(len(ops)))
    eq = ",".join("".join(o) for o in ops) + "->" + "".join(out)
    shapes = [tuple(sizes[a] for a in o) for o in ops]
    costing = ChainCosting(g, c)

    def cost_of(path):
        return costing.cost(canonical(path_tree([tuple(p) for p in path], len(ops))))

    path, _ = opt_einsum.contract_path(eq, *shapes, shapes=True,
                                       optimize=opt_einsum.DynamicProgramming(search_outer=True))
    dp = cost_of(path)
    assert min(o.macs + o.flops_vector for o in pairwise) == dp.macs + dp.flops_vector
    path, info = opt_einsum.contract_path(eq, *shapes, shapes=True, optimize="optimal")
    assert cost_of(path).flops == info.opt_cost  # one cost model
    assert min(o.flops for o in pairwise) <= info.opt_cost


def test_opt_einsum_optimal_counterexample_by_hand():
    g = one_node_graph({"a": 6, "b": 4, "d": 4, "e": 5, "f": 4}, [list("efa"), list("fe"), list("e"), list("bda")],
                       list("dbf"))
    (r,) = analyse(g)
    assert (r.best.text, r.best.flops) == ("((x0*(x1*x2))*x3)", 20 + 2 * 120 + 2 * 384)
    _, info = opt_einsum.contract_path("efa,fe,e,bda->dbf", (5, 4, 6), (4, 5), (5,), (4, 4, 6), shapes=True,
                                       optimize="optimal")
    assert info.opt_cost == 1128


def test_more_than_six_operands_use_opt_einsum_path_search():
    n = 8
    sizes = [3, 40, 2, 50, 4, 30, 5, 60, 2]
    ranks = {f"r{i}": s for i, s in enumerate(sizes)}
    ops = [[f"r{i}", f"r{i + 1}"] for i in range(n)]
    g = one_node_graph(ranks, ops, ["r0", f"r{n}"])
    (r,) = analyse(g)
    assert r.method == "opt_einsum" and r.worst is None
    eq = ",".join(f"{chr(97 + i)}{chr(98 + i)}" for i in range(n)) + f"->a{chr(97 + n)}"
    _, info = opt_einsum.contract_path(eq, *[(sizes[i], sizes[i + 1]) for i in range(n)], shapes=True,
                                       optimize="dp")
    assert r.best.flops == info.opt_cost < r.written.flops


def test_missing_opt_einsum_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "opt_einsum", None)
    ops = [[f"r{i}", f"r{i + 1}"] for i in range(7)]
    g = one_node_graph({f"r{i}": 2 for i in range(8)}, ops, ["r0", "r7"])
    with pytest.raises(ReorderError, match="pip install opt_einsum"):
        analyse(g)


# ---------------------------------------------------------------------------- chains


def test_rank_names_are_unified_through_intermediates_and_clashes_renamed():
    """ab[i,k] = A[i,j] B[j,k]; D[i,j] = ab[i,k] C[k,j]: the first node's j is another label."""
    g = graph({"i": 8, "j": 2, "k": 4},
              [("A", "i j", "input"), ("B", "j k", "weight"), ("C", "k j", "weight"),
               ("ab", "i k", "intermediate"), ("D", "i j", "output")],
              [mm("n1", ["A[i, j]", "B[j, k]"], "ab[i, k]", "i k j"), mm("n2", ["ab[i, k]", "C[k, j]"], "D[i, j]",
                                                                         "i j k")])
    (c,) = find_chains(g)
    assert c.equation() == "D[i, j] = A[i, j_2] * B[j_2, k] * C[k, j]"
    assert c.new_ranks == (("j_2", 2),)
    # written ((A*B)*C): i j_2 k = 64 + i k j = 64 MACs; best (A*(B*C)): j_2 k j = 16 + i j_2 j = 32.
    (r,) = analyse(g)
    assert (r.written.macs, r.best.macs, r.best.text) == (128, 48, "(A*(B*C))")
    new, result = apply(g, [r])
    assert ("j_2", 2) in new.ranks and result.passed and result.scope == "graph" and not result.reduced
    x = random_inputs(g, 3)
    np.testing.assert_allclose(solar_io.execute(new, x)["D"], np.einsum("ij,jk,kl->il", x["A"], x["B"], x["C"]),
                               rtol=1e-5, atol=1e-6)


def test_intermediates_read_twice_outputs_and_windows_break_chains():
    base = chain3()
    # BC read by a second node: it cannot be folded away.
    tensors = [(t.name, " ".join(t.ranks), t.role) for t in base.tensors]
    twice = graph(dict(base.ranks), tensors + [("Z", "j l", "output")],
                  [*base.nodes, Node("copy", "einsum", "t", (solar_io.parse_access("BC[j, l]"),),
                                     (solar_io.parse_access("Z[j, l]"),), space=("j", "l"), map="identity",
                                     reduce="none")])
    assert find_chains(twice) == []
    as_output = graph(dict(base.ranks), [(t.name, " ".join(t.ranks), "output" if t.name == "BC" else t.role)
                                         for t in base.tensors], list(base.nodes))
    assert find_chains(as_output) == []
    window = graph({"i": 4, "j": 6, "k": 3, "l": 5, "w": 2},
                   [("A", "i j", "input"), ("B", "j k", "weight"), ("C", "k l", "weight"),
                    ("BC", "j l", "intermediate"), ("D", "i l", "output")],
                   [mm("bc", ["B[j, k]", "C[k, l]"], "BC[j, l]", "j l k"),
                    mm("abc", ["A[i, 2*w + k]", "BC[2*w + k, l]"], "D[i, l]", "i l w k")])
    assert find_chains(window) == []


# ---------------------------------------------------------------------------- --apply


def test_apply_round_trip_on_the_cli(tmp_path, capsys):
    src, out = tmp_path / "chain4.yaml", tmp_path / "better.yaml"
    solar_io.dump(chain4(), src)
    with pytest.raises(SystemExit) as e:
        main(["reorder", str(src), "--apply", "-o", str(out)])
    text = capsys.readouterr().out
    assert e.value.code == 0, text
    assert "(((A*B)*C)*E)" in text and "check: reference executor, the whole graph at full sizes" in text
    new = solar_io.load(out)  # validates
    # MACs of the best order ((A*B)*C)*E: ijk 30 + ikl 70 + ilm 154 = 254; written: kml 385 + jmk 165 + imj 66.
    assert solar_io.graph_metrics(new).macs == 254 and solar_io.graph_metrics(chain4()).macs == 616
    x = random_inputs(new, 7)
    want = np.einsum("ij,jk,kl,lm->im", x["A"], x["B"], x["C"], x["E"])
    np.testing.assert_allclose(solar_io.execute(new, x)["D"], want, rtol=1e-5, atol=1e-6)
    assert {n.name for n in new.nodes} == {"abce", "abce_1", "abce_2"}
    assert {"CE", "BCE"}.isdisjoint(new.tensor_map) and {"A__B", "A__B__C"} <= set(new.tensor_map)
    # Nothing left to improve: refused with one line.
    with pytest.raises(SystemExit) as e:
        main(["reorder", str(out), "--apply", "-o", str(tmp_path / "again.yaml")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 1 and len(err) == 1 and "nothing to reorder" in err[0]
    assert not (tmp_path / "again.yaml").exists()


def test_apply_on_mla_checks_at_reduced_sizes():
    g = solar_io.load(MLA)
    reports = analyse(g)
    assert [len(r.chain.operands) for r in reports] == [4, 3, 4]
    assert [r.improves for r in reports] == [True, False, True]
    new, result = apply(g, reports)
    assert result.passed and result.scope == "graph" and dict(result.reduced)["T"] < 4096
    assert set(result.compared) == {"y", "scores_nope"}
    # DeepSeek's absorbed order: scores = ((c_q w_uq) w_uk) c_kv, never materialising k or v per token.
    assert reports[0].best.text == "(((c_q*w_uq)*w_uk)*c_kv)"
    assert reports[2].best.text == "(((probs*c_kv)*w_uv)*w_o)"
    assert solar_io.graph_metrics(new).macs < solar_io.graph_metrics(g).macs / 50


def test_a_wrong_rewrite_fails_the_check_and_is_refused(monkeypatch):
    g = chain4()
    (r,) = analyse(g)
    good = reorder_apply.rewrite(g, [r])
    # The last step adds instead of multiplying: still a valid graph, other values.
    bad = dataclasses.replace(good, nodes=tuple(dataclasses.replace(n, map="add") if n.name == "abce" else n
                                                for n in good.nodes))
    assert not [i for i in solar_io.validate(bad) if i.severity == "error"]
    assert check(g, good, [r.chain]).passed
    assert check(g, bad, [r.chain]).validation.status == "failed"
    monkeypatch.setattr(reorder_apply, "rewrite", lambda *_: bad)
    with pytest.raises(ReorderError, match="does not match the original"):
        apply(g, [r])


def test_json_and_hw_columns(tmp_path, capsys):
    src = tmp_path / "chain3.yaml"
    solar_io.dump(chain3(), src)
    with pytest.raises(SystemExit) as e:
        main(["reorder", str(src), "--hw", "h100-sxm", "--json"])
    assert e.value.code == 0
    doc = json.loads(capsys.readouterr().out)
    (c,) = doc["chains"]
    assert doc["objective"] == "sol" and len(c["orders"]) == 3 and c["written"]["order"] == "(A*(B*C))"
    report = solar_io.bound(chain3(), "h100-sxm")
    assert c["written"]["sol_unfused"] == pytest.approx(report.unfused.time)
    assert all(o["sol_unfused"] > 0 for o in c["orders"])


def test_cli_errors_are_one_line(tmp_path):
    missing = run_cli("reorder", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "nope.yaml" in missing.stderr
    src = tmp_path / "matmul.yaml"
    src.write_text((ROOT / "examples" / "graphs" / "matmul.yaml").read_text())
    no_chain = run_cli("reorder", str(src), "--apply", "-o", str(tmp_path / "o.yaml"))
    assert no_chain.returncode == 1 and no_chain.stderr.count("\n") == 1
    assert "no contraction chain" in no_chain.stderr and "matmul.yaml" in no_chain.stderr


def test_apply_needs_output(tmp_path, capsys):
    src = Path(tmp_path / "c.yaml")
    solar_io.dump(chain3(), src)
    with pytest.raises(SystemExit) as e:
        main(["reorder", str(src), "--apply"])
    assert e.value.code == 1 and "--apply and -o/--output go together" in capsys.readouterr().err


def test_graphs_the_executor_cannot_run_are_checked_chain_by_chain():
    """An opaque node downstream: the whole graph cannot run, the chain alone is checked."""
    base = chain4()
    g = dataclasses.replace(
        base, tensors=tuple(dataclasses.replace(t, role="intermediate") if t.name == "D" else t
                            for t in base.tensors) + (Tensor("Z", ("i", "m"), "fp32", "output"),),
        nodes=base.nodes + (Node("custom", "opaque", "my.op", (solar_io.parse_access("D"),),
                                 (solar_io.parse_access("Z"),), reason="no lowering"),))
    assert not [i for i in solar_io.validate(g) if i.severity == "error"]
    (r,) = analyse(g)
    new, result = apply(g, [r])
    assert result.scope == "chains" and result.passed and result.compared == ("D",)
    assert "the reordered chains alone at full sizes" in result.describe()
    assert new.node_map["custom"] == g.node_map["custom"]


def test_objective_sol_needs_a_chip(tmp_path, capsys):
    src = tmp_path / "c.yaml"
    solar_io.dump(chain3(), src)
    with pytest.raises(SystemExit) as e:
        main(["reorder", str(src), "--by", "sol"])
    assert e.value.code == 1 and "--by sol needs a chip" in capsys.readouterr().err
    (r,) = analyse(chain3(), objective="bytes")
    assert (r.best.text, r.best.bytes) == ("((A*B)*C)", 3400)
