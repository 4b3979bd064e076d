"""Node forms (solar_io.node_form): nodes of a repeated layer share one form, and the passes that answer once
per form (metrics, semantic validation, the tiling structure) give every node what a pass over each node
alone gives it, including where tensors of one form differ in dtype, storage or the graph's lists.

Hand counts, M = 8, E = D = 4, fp32: each layer ``h_k = h_{k-1} @ w_k`` is 8 * 4 * 4 = 128 MACs and reads
its input (128 B) and its weight (64 B), writing 128 B; a bf16 weight is 32 B; an immediate weight (a
constant with a value) is no bytes; a layer listed under ``uncharged_work`` is charged no MACs.
"""

from __future__ import annotations

from dataclasses import fields, replace

from solar_io import graph_metrics, loads, node_metrics, validate
from solar_io.affine import parse_access
from solar_io.format.yamltext import emit
from solar_io.fourier import Fourier
from solar_io.graph import Assumption, Node
from solar_io.metrics import in_place_outputs, returned_tensors, uncharged_nodes
from solar_io.node_form import LEFT_OUT, forms, local_form
from solar_io.node_lists import UNCHARGED

M, E = 8, 4


def layers(weights: list[dict], uncharged: tuple[str, ...] = ()):  # noqa: ANN201
    """x -> h0 -> h1 -> ... through one matmul per weight (each a dict of the weight's tensor fields)."""
    k = len(weights)
    tensors = [{"name": "x", "ranks": ["M", "E"], "dtype": "fp32", "role": "input"}]
    nodes = []
    for i, w in enumerate(weights):
        tensors.append({"name": f"w{i}", "ranks": ["E", "D"], "dtype": "fp32", "role": "weight", **w})
        tensors.append({"name": f"h{i}", "ranks": ["M", "D"], "dtype": "fp32",
                        "role": "output" if i == k - 1 else "intermediate"})
        prev = "x" if i == 0 else f"h{i - 1}"
        nodes.append({"name": f"l{i}", "kind": "einsum", "op": "aten.mm", "space": ["M", "D", "E"],
                      "inputs": [f"{prev}[M, E]", f"w{i}[E, D]"], "output": f"h{i}[M, D]", "map": "mul",
                      "reduce": "add", "kernel": f"mm_{i}", "location": f"model.py:{10 + i}"})
    doc = {"format": "solar-io.einsum-graph", "version": "1.5", "name": "layers",
           "producer": {"tool": "solar-io", "tool_version": "0.1.0", "frontend": "hand-written"},
           "ranks": {"M": M, "D": E, "E": E}, "tensors": tensors, "nodes": nodes,
           "validation": {"status": "skipped", "method": "none"}}
    g = loads(emit(doc))
    if uncharged:
        g = replace(g, assumptions=(Assumption("training", "x", "hand-written", ((UNCHARGED, uncharged),)),))
    return g


def test_layers_share_a_form_up_to_names():
    g = layers([{}, {}, {}])
    (f0, n0), (f1, n1), (f2, n2) = g.node_forms
    assert f0 == f1 == f2 and n1 == ("h0", "w1", "h1") and n2 == ("h1", "w2", "h2")
    # kernel and location (the source call) differ per layer and are not part of the form
    assert local_form(g.nodes[0])[0] == local_form(g.nodes[1])[0]
    # nor the source op's attributes: an optimizer node's param names its layer's weight
    tagged = [replace(n, attrs=(("param", f"w{i}"),)) for i, n in enumerate(g.nodes)]
    assert len({f for f, _ in forms(tuple(tagged))}) == 1
    twice = replace(g.nodes[1], inputs=(g.nodes[1].inputs[0], replace(g.nodes[1].inputs[1], tensor="h0")))
    assert forms((g.nodes[1], twice))[1][0] == 1  # one tensor read twice: another problem


def test_metrics_per_form_are_each_nodes_own():
    """A bf16 weight, an immediate weight and an uncharged layer share the form of the plain layers; each
    gets its own bytes and MACs (hand counts above), as node_metrics of that node alone gives."""
    g = layers([{}, {}, {"dtype": "bf16"}, {"role": "constant", "value": 0.5}, {}], uncharged=("l4",))
    got = graph_metrics(g).nodes
    free, in_place, returned = uncharged_nodes(g), in_place_outputs(g), returned_tensors(g)
    assert got == tuple(node_metrics(g, n, free, in_place, returned) for n in g.nodes)
    assert [m.macs for m in got] == [128, 128, 128, 128, 0]
    assert [m.bytes_read for m in got] == [{"x": 128.0, "w0": 64.0}, {"h0": 128.0, "w1": 64.0},
                                           {"h1": 128.0, "w2": 32.0}, {"h2": 128.0, "w3": 0.0},
                                           {"h3": 128.0, "w4": 64.0}]
    assert [m.bytes_written for m in got] == [{f"h{i}": 128.0} for i in range(5)]


def test_validation_checks_each_tensor_behind_a_clean_form():
    """The second layer has the first's form, but its weight's second dimension is a rank of size 2 that
    the layer's index D (size 4) runs past: that error is still found, since a node's checks are skipped
    only where a clean node of its form had tensors of the same ranks and dtypes."""
    g = layers([{}, {}])
    assert validate(g) == []
    ranks = dict(g.ranks)
    ranks["F"] = 2
    bad = replace(g, ranks=tuple(ranks.items()),
                  tensors=tuple(replace(t, ranks=("E", "F")) if t.name == "w1" else t for t in g.tensors))
    errors = [i.message for i in validate(bad) if i.severity == "error"]
    assert any("node l1" in m and "w1" in m for m in errors), errors
    assert not any("node l0" in m for m in errors)


def test_every_node_field_is_in_the_form_or_left_out_on_purpose():
    """Each field of Node, changed alone, changes the form exactly when it is not in ``LEFT_OUT`` (the memos
    then tell nodes apart by it). A field added to Node fails here until it has a change below."""
    base = Node("n", "einsum", "aten.add", (parse_access("x[M]"), parse_access("h[M]")), (parse_access("y[M]"),),
                space=("M",), map="add", reduce="none")
    changes = {"name": "m", "kind": "data_movement", "op": "aten.mul", "inputs": (parse_access("x[M]"),),
               "outputs": (parse_access("x[M]"),), "space": ("M", "N"), "map": "mul", "reduce": "add",
               "movement": "copy", "axis": "M", "view": True, "pad": (("x", (("M", 1, 0),)),), "fill": 1.0,
               "reason": "why", "location": "f.py:1", "attrs": (("k", 1),), "scan": "M", "init": "h",
               "kernel": "k0", "phase": "forward", "live": (("M", 1),),
               "fft": Fourier("c2c", (0,), False, "none")}
    assert set(changes) == {f.name for f in fields(Node)}
    form = local_form(base)[0]
    changed = {name for name, v in changes.items() if local_form(replace(base, **{name: v}))[0] != form}
    assert changed == set(changes) - LEFT_OUT
