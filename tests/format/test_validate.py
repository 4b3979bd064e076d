"""Semantic rules of validate(), one valid and one invalid case each."""

from __future__ import annotations

import pytest
from paths import TESTS

from solar_io import GraphError, loads

HEAD = """\
format: solar-io.einsum-graph
version: '1.0'
producer: {tool: solar-io, tool_version: 0.1.0, frontend: hand-written}
ranks: {A: 2, B: 3, C: 5, F: 6, V: 10}
validation: {status: skipped, method: none}
"""


def problems(text: str) -> str:
    """Every error message of an invalid graph, one per line."""
    with pytest.raises(GraphError) as e:
        loads(text)
    return "\n".join(i.message for i in e.value.issues)


def graph(tensors: str, nodes: str) -> str:
    return HEAD + "tensors:\n" + tensors + "nodes:\n" + nodes


T_AB = "- {name: x, ranks: [A, B], dtype: fp32, role: input}\n"


def test_reshape_counts_elements():
    ok = graph(T_AB + "- {name: y, ranks: [F], dtype: fp32, role: output}\n",
               "- {name: r, kind: data_movement, op: view, movement: reshape, inputs: [x], output: y}\n")
    assert loads(ok).nodes[0].movement == "reshape"
    with pytest.raises(GraphError, match="reshape from 6 to 5 elements"):
        loads(ok.replace("ranks: [F]", "ranks: [C]"))
    with pytest.raises(GraphError, match="takes whole tensors"):
        loads(ok.replace("output: y}", "output: 'y[F]'}"))


def test_concat_shapes():
    ok = graph("- {name: x, ranks: [A, B], dtype: fp32, role: input}\n"
               "- {name: z, ranks: [A, B], dtype: fp32, role: input}\n"
               "- {name: y, ranks: [A, F], dtype: fp32, role: output}\n",
               "- {name: c, kind: data_movement, op: cat, movement: concat, inputs: [x, z], output: y, axis: F}\n")
    assert loads(ok).nodes[0].axis == "F"
    with pytest.raises(GraphError, match="inputs sum to 6 along C, output has 5"):
        loads(ok.replace("ranks: [A, F]", "ranks: [A, C]").replace("axis: F", "axis: C"))
    with pytest.raises(GraphError, match="concat axis 'B' is not a rank of its output"):
        loads(ok.replace("axis: F", "axis: B"))


def test_movement_keeps_dtype_and_copies_reduce_nothing():
    ok = graph(T_AB + "- {name: y, ranks: [B, A], dtype: fp32, role: output}\n",
               "- {name: t, kind: data_movement, op: permute, movement: copy, space: [B, A], inputs: ['x[A, B]'],"
               " output: 'y[B, A]', view: true}\n")
    assert loads(ok).nodes[0].view
    with pytest.raises(GraphError, match="cannot change dtype"):
        loads(ok.replace("dtype: fp32, role: output", "dtype: bf16, role: output"))
    with pytest.raises(GraphError, match="a copy reduces nothing"):
        loads(ok.replace("space: [B, A]", "space: [B, A, C]"))


def test_argmax_needs_integer_output_and_one_reduced_rank():
    ok = graph(T_AB + "- {name: i, ranks: [A], dtype: int64, role: output}\n",
               "- {name: am, kind: einsum, op: argmax, space: [A, B], inputs: ['x[A, B]'], output: 'i[A]',"
               " map: identity, reduce: argmax}\n")
    assert loads(ok).nodes[0].reduce == "argmax"
    with pytest.raises(GraphError, match="output dtype must be an integer"):
        loads(ok.replace("dtype: int64", "dtype: fp32"))


def test_reduce_none_must_not_drop_ranks():
    bad = graph(T_AB + "- {name: s, ranks: [A], dtype: fp32, role: output}\n",
                "- {name: s1, kind: einsum, op: sum, space: [A, B], inputs: ['x[A, B]'], output: 's[A]',"
                " map: identity, reduce: none}\n")
    with pytest.raises(GraphError, match="reduce none, but ranks B"):
        loads(bad)


def test_output_must_be_written_whole():
    bad = graph(T_AB + "- {name: y, ranks: [A, F], dtype: fp32, role: output}\n",
                "- {name: e, kind: einsum, op: exp, space: [A, B], inputs: ['x[A, B]'], output: 'y[A, B]',"
                " map: exp, reduce: none}\n")
    with pytest.raises(GraphError, match="every output element must be written once"):
        loads(bad)


def test_gather_index_must_be_an_integer_input():
    ok = graph("- {name: tab, ranks: [V, C], dtype: bf16, role: weight}\n"
               "- {name: ids, ranks: [A], dtype: int64, role: input}\n"
               "- {name: y, ranks: [A, C], dtype: bf16, role: output}\n",
               "- {name: emb, kind: data_movement, op: embedding, movement: copy, space: [A, C],"
               " inputs: ['ids[A]', 'tab[@ids, C]'], output: 'y[A, C]'}\n")
    assert loads(ok).nodes[0].name == "emb"
    with pytest.raises(GraphError, match="must have an integer dtype"):
        loads(ok.replace("dtype: int64", "dtype: fp32"))
    assert "@idz must name another input" in problems(ok.replace("tab[@ids, C]", "tab[@idz, C]"))


def test_pad_names_a_read_tensor_and_its_rank():
    ok = graph(T_AB + "- {name: y, ranks: [A, B], dtype: fp32, role: output}\n",
               "- {name: p, kind: einsum, op: shift, space: [A, B], inputs: ['x[A, B - 1]'], output: 'y[A, B]',"
               " map: identity, reduce: none, pad: {x: {B: [1, 0]}}}\n")
    assert loads(ok).nodes[0].pad_of("x") == {"B": (1, 0)}
    with pytest.raises(GraphError, match="spans \\[-1, 1\\], outside \\[0, 2\\]"):
        loads(ok.replace(", pad: {x: {B: [1, 0]}}", ""))
    with pytest.raises(GraphError, match="pad names 'q'"):
        loads(ok.replace("pad: {x:", "pad: {q:"))
    with pytest.raises(GraphError, match="C is not a rank of x"):
        loads(ok.replace("{B: [1, 0]}", "{B: [1, 0], C: [1, 1]}"))


def test_dataflow_rules():
    chain = graph(T_AB + "- {name: h, ranks: [A, B], dtype: fp32, role: intermediate}\n"
                  "- {name: y, ranks: [A, B], dtype: fp32, role: output}\n",
                  "- {name: n1, kind: einsum, op: exp, space: [A, B], inputs: ['x[A, B]'], output: 'h[A, B]',"
                  " map: exp, reduce: none}\n"
                  "- {name: n2, kind: einsum, op: neg, space: [A, B], inputs: ['h[A, B]'], output: 'y[A, B]',"
                  " map: neg, reduce: none}\n")
    assert len(loads(chain).nodes) == 2
    lines = chain.splitlines(keepends=True)
    swapped = "".join(lines[:-2] + [lines[-1], lines[-2]])
    with pytest.raises(GraphError, match="reads h before node n1 produces it; list nodes in topological order"):
        loads(swapped)
    with pytest.raises(GraphError, match="intermediate tensor h is never read"):
        loads(chain.replace("inputs: ['h[A, B]']", "inputs: ['x[A, B]']"))
    assert "no tensor with role output" in problems(chain.replace("role: output", "role: intermediate"))
    with pytest.raises(GraphError, match="tensor name 'x' is used twice"):
        loads(chain.replace("tensors:\n", "tensors:\n" + T_AB))
    with pytest.raises(GraphError, match="node name 'n1' is used twice"):
        loads(chain.replace("name: n2", "name: n1"))
    with pytest.raises(GraphError, match="reads its own output"):
        loads(chain.replace("inputs: ['x[A, B]'], output: 'h[A, B]'", "inputs: ['h[A, B]'], output: 'h[A, B]'"))


def test_opaque_needs_reason_and_whole_tensors():
    ok = graph(T_AB + "- {name: y, ranks: [C], dtype: fp32, role: output}\n",
               "- {name: o, kind: opaque, op: lib.f, inputs: [x], outputs: [y], reason: no lowering}\n")
    assert loads(ok).nodes[0].reason == "no lowering"
    with pytest.raises(GraphError, match="say why the op is opaque"):
        loads(ok.replace("reason: no lowering", "reason: '  '"))
    with pytest.raises(GraphError, match="field 'map' is not allowed on a opaque node"):
        loads(ok.replace("reason: no lowering", "reason: x, map: mul"))


def test_index_tensors_are_not_map_arguments():
    text = graph("- {name: tok, ranks: [V, C], dtype: fp32, role: weight}\n"
                 "- {name: pos, ranks: [A, C], dtype: fp32, role: weight}\n"
                 "- {name: ids, ranks: [A], dtype: int64, role: input}\n"
                 "- {name: y, ranks: [A, C], dtype: fp32, role: output}\n",
                 "- {name: emb, kind: einsum, op: embedding+add, space: [A, C],"
                 " inputs: ['tok[@ids, C]', 'ids[A]', 'pos[A, C]'], output: 'y[A, C]', map: add, reduce: none}\n")
    from solar_io import graph_metrics

    m = graph_metrics(loads(text)).nodes[0]
    assert m.flops_vector == 2 * 5  # one add per output element, not two
    assert m.bytes_read == {"tok": 2 * 5 * 4, "ids": 2 * 8, "pos": 2 * 5 * 4}


def test_views_and_axis_are_only_where_they_mean_something():
    ok = graph(T_AB + "- {name: y, ranks: [A, B], dtype: fp32, role: output}\n",
               "- {name: p, kind: data_movement, op: shift, movement: copy, space: [A, B], inputs: ['x[A, B - 1]'],"
               " output: 'y[A, B]', pad: {x: {B: [1, 0]}}}\n")
    assert loads(ok).nodes[0].pad_of("x") == {"B": (1, 0)}
    assert "cannot be a view" in problems(ok.replace("output: 'y[A, B]'", "output: 'y[A, B]', view: true"))
    assert "axis is only for concat" in problems(ok.replace("output: 'y[A, B]'", "output: 'y[A, B]', axis: A"))


def test_reduced_ranks_of_the_validation_record():
    text = graph(T_AB + "- {name: y, ranks: [A, B], dtype: fp32, role: output}\n",
                 "- {name: e, kind: einsum, op: exp, space: [A, B], inputs: ['x[A, B]'], output: 'y[A, B]',"
                 " map: exp, reduce: none}\n")
    assert loads(text.replace("method: none}", "method: none, reduced_ranks: {B: 2}}")).validation.reduced_ranks
    assert "exceeds its size" in problems(text.replace("method: none}", "method: none, reduced_ranks: {B: 9}}"))
    assert "not declared" in problems(text.replace("method: none}", "method: none, reduced_ranks: {Z: 1}}"))
    assert "bad rank name" in problems(text.replace("method: none}", "method: none, reduced_ranks: {'9x': 1}}"))


def test_attrs_and_pad_keys_are_checked():
    text = graph(T_AB + "- {name: y, ranks: [A, B], dtype: fp32, role: output}\n",
                 "- {name: e, kind: einsum, op: exp, space: [A, B], inputs: ['x[A, B]'], output: 'y[A, B]',"
                 " map: exp, reduce: none, attrs: {1: a}}\n")
    assert "attrs map string names" in problems(text)
    assert "must be a string name" in problems(text.replace("attrs: {1: a}", "pad: {1: {A: [0, 0]}}"))
    assert "bad index expression" in problems(text.replace("x[A, B]'], output", "x[A, B + \u0663]'], output"))


def test_uncharged_work_names_graph_nodes():
    """An assumption's ``uncharged_work`` (nodes charged no compute: node_lists.UNCHARGED) must name nodes
    of the graph: a typo would leave the listed work charged while the file says otherwise."""
    from dataclasses import replace

    from solar_io import load, validate
    from solar_io.graph import Assumption

    g = load(TESTS / "golden" / "v1.3" / "training_kernels_assumptions.yaml")
    listed = lambda *names: replace(g, assumptions=(Assumption("training", "x", "y", (("uncharged_work", names),)),))  # noqa: E731
    assert not [i for i in validate(listed(g.nodes[0].name)) if "uncharged" in i.message]
    assert [i.message for i in validate(listed(g.nodes[0].name, "nope")) if "uncharged" in i.message] == [
        "uncharged node 'nope' is not a graph node"]


def test_updates_names_an_input_of_the_same_shape_and_dtype_once():
    """``updates`` (1.5): an output that is an input updated in place; the input must exist, be an
    input of the output's shape and dtype, and be the memory of one output only."""
    tensors = ("- {name: cache, ranks: [V, B], dtype: fp32, role: input}\n"
               "- {name: k, ranks: [A, B], dtype: fp32, role: input}\n"
               "- {name: pos, ranks: [A], dtype: int64, role: input}\n"
               "- {name: new, ranks: [V, B], dtype: fp32, role: output, updates: cache}\n")
    nodes = ("- {name: put, kind: einsum, op: index_put, space: [A, B], inputs: ['cache[@pos, B]', 'k[A, B]', "
             "'pos[A]'], output: 'new[@pos, B]', init: cache, map: identity, reduce: none}\n")
    ok = graph(tensors, nodes).replace("version: '1.0'", "version: '1.5'")
    assert loads(ok).tensor_map["new"].updates == "cache"
    assert "not an input of the graph" in problems(ok.replace("updates: cache", "updates: k2"))
    assert "not an input of the graph" in problems(ok.replace("updates: cache", "updates: put"))
    assert "only outputs may update an input" in problems(ok.replace("role: input}\n- {name: k",
                                                                     "role: input, updates: k}\n- {name: k"))
    wrong = ok.replace("updates: cache", "updates: k")
    assert "updates input k in place but is fp32[10, 3], the input fp32[2, 3]" in problems(wrong)
    twice = ok.replace("role: output, updates: cache}\n", "role: output, updates: cache}\n"
                       "- {name: new2, ranks: [V, B], dtype: fp32, role: output, updates: cache}\n") + (
        "- {name: copy, kind: data_movement, op: copy, movement: copy, inputs: [new], output: new2}\n")
    assert "input cache is already updated in place by output new" in problems(twice)
