"""Repeat blocks (format 1.4): a block of nodes or tensors written once for many instances.

The golden file ``tests/golden/v1.4/rnn_repeat.yaml`` is a four-step tanh RNN whose steps 1..3
are one block: it loads as the unrolled graph, round-trips byte for byte, runs on the executor
as numpy's recurrence does, and its counts equal those of the same graph written out node by node.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import yaml
from jsonschema import Draft202012Validator
from paths import ROOT

import solar_io
from solar_io.errors import GraphError
from solar_io.format import repeat
from solar_io.format.files import dumps
from solar_io.metrics import graph_metrics

GOLDEN = ROOT / "tests" / "golden" / "v1.4" / "rnn_repeat.yaml"
SCHEMA = json.loads((ROOT / "schema" / "einsum-graph-v1.schema.json").read_text(encoding="utf-8"))


def _golden() -> solar_io.Graph:
    return solar_io.load(GOLDEN)


def test_block_loads_as_the_unrolled_graph_and_round_trips():
    g = _golden()
    assert [n.name for n in g.nodes] == ["xw", "h.0"] + [f"{p}.{t}" for t in (1, 2, 3) for p in ("hu", "pre", "h")] \
        + ["y"]
    assert str(g.nodes[3].inputs[0]) == "xw[1, B, H]" and str(g.nodes[2].inputs[0]) == "h.0[B, K]"
    assert [(r.at, r.count, r.size) for r in g.repeats] == [(5, 3, 3), (2, 3, 3)]
    text = GOLDEN.read_text(encoding="utf-8")
    assert dumps(g) == text and solar_io.loads(text) == g


def test_the_unrolled_file_has_the_same_graph_and_counts():
    g = _golden()
    flat = repeat.unrolled(g)
    text = dumps(flat)
    assert "repeat:" not in text and text.count("- name:") == len(g.nodes) + len(g.tensors)
    again = solar_io.loads(text)
    assert again.nodes == g.nodes and again.tensors == g.tensors
    a, b = graph_metrics(g), graph_metrics(again)
    assert (a.macs, a.bytes, a.boundary_bytes, a.flops_vector, a.transcendental) == \
        (b.macs, b.bytes, b.boundary_bytes, b.flops_vector, b.transcendental)
    # by hand: T*B*H*D for x@w, B*H*K per recurrent step (3 steps); tanh on B*H in 4 steps
    assert a.macs == 4 * 2 * 5 * 3 + 3 * 2 * 5 * 5 and a.transcendental == 4 * 2 * 5


def test_executor_runs_the_recurrence():
    rng = np.random.default_rng(0)
    x, w, u = (rng.standard_normal(s).astype(np.float32) for s in ((4, 2, 3), (3, 5), (5, 5)))
    got = solar_io.execute(_golden(), {"x": x, "w": w, "u": u})["y"]
    h = np.tanh(x[0] @ w)
    for t in range(1, 4):
        h = np.tanh(x[t] @ w + h @ u)
    np.testing.assert_allclose(got, h, rtol=1e-6, atol=1e-6)


def test_an_older_version_refuses_a_block_naming_the_field():
    text = GOLDEN.read_text(encoding="utf-8").replace('version: "1.4"', 'version: "1.3"', 1)
    with pytest.raises(GraphError) as e:
        solar_io.loads(text, "old.yaml")
    first = str(e.value).splitlines()[0]
    assert "old.yaml" in first and "'repeat' is new in format 1.4" in first and "1.3" in first
    doc = yaml.safe_load(text)
    assert not Draft202012Validator(SCHEMA).is_valid(doc)
    assert Draft202012Validator(SCHEMA).is_valid(yaml.safe_load(GOLDEN.read_text(encoding="utf-8")))
    g = replace(_golden(), version="1.3")  # a graph built in code is refused the same way
    assert any("'repeat' is new in format 1.4" in i.message for i in solar_io.validate(g))


def test_a_block_that_no_longer_describes_its_nodes_is_written_node_by_node():
    """A graph changed after capture (here: a training phase on every node) keeps exact files."""
    g = _golden()
    changed = replace(g, nodes=tuple(replace(n, phase="forward") for n in g.nodes))
    issues = solar_io.validate(changed)
    assert [i.severity for i in issues] == ["warning"] and "written one by one" in issues[0].message
    text = dumps(changed)
    assert text.count("repeat:") == 1 and solar_io.loads(text).nodes == changed.nodes  # the tensor block stays
    moved = replace(g.repeats[1], at=3)  # instances out of place
    assert any("differ" in i.message for i in solar_io.validate(replace(g, repeats=(g.repeats[0], moved))))
    with pytest.raises(GraphError, match="count must be >= 1"):
        solar_io.loads(GOLDEN.read_text(encoding="utf-8").replace("count: 3", "count: 0", 1))
    with pytest.raises(GraphError, match="var"):
        solar_io.loads(GOLDEN.read_text(encoding="utf-8").replace("var: t", "var: B", 1))
    # a count that would unroll past the in-memory cap is refused at once (it hung, expanding 3e11 tensors)
    with pytest.raises(GraphError, match=r"repeat\.count: 100000000000 instances of 3 tensors unroll past 2097152"):
        solar_io.loads(GOLDEN.read_text(encoding="utf-8").replace("count: 3", "count: 100000000000", 1))


def test_a_backwards_block():
    """step -1 with {t+1}: the reverse direction of a bidirectional layer."""
    text = GOLDEN.read_text(encoding="utf-8")
    text = text.replace("xw[0, B, H]", "xw[3, B, H]").replace("name: h.0", "name: h.3", 2) \
        .replace("h.0[B, H]", "h.3[B, H]")
    text = text.replace("start: 1\n    step: 1", "start: 2\n    step: -1")
    text = text.replace('"h.{t-1}[B, K]"', '"h.{t+1}[B, K]"')
    text = text.replace("h.3[B, H]\n  output: y", "h.0[B, H]\n  output: y")
    g = solar_io.loads(text)
    assert [n.name for n in g.nodes][2:5] == ["hu.2", "pre.2", "h.2"] and g.nodes[-1].inputs[0].tensor == "h.0"
    rng = np.random.default_rng(1)
    x, w, u = (rng.standard_normal(s).astype(np.float32) for s in ((4, 2, 3), (3, 5), (5, 5)))
    h = np.tanh(x[3] @ w)
    for t in (2, 1, 0):
        h = np.tanh(x[t] @ w + h @ u)
    np.testing.assert_allclose(solar_io.execute(g, {"x": x, "w": w, "u": u})["y"], h, rtol=1e-6, atol=1e-6)


def test_validation_checks_every_instance_through_the_first_second_and_last():
    """Nodes of instances 2 .. count-2 are checked through instances 1 and count-1 (their index
    constants are affine in t) unless a tensor they use is declared unlike instance 1's."""
    text = GOLDEN.read_text(encoding="utf-8").replace("  T: 4", "  T: 8").replace("count: 3", "count: 7") \
        .replace("h.3[B, H]\n  output: y", "h.7[B, H]\n  output: y")
    g = solar_io.loads(text)
    assert len(g.nodes) == 2 + 7 * 3 + 1 and not solar_io.validate(g)
    assert repeat.covered_nodes(g, []) == set(range(2 + 2 * 3, 2 + 6 * 3))  # instances t = 3 .. 6
    with pytest.raises(GraphError, match="xw"):  # out of bounds in the last instance only (t = 7 reads xw[8])
        solar_io.loads(text.replace("      - xw[t, B, H]", "      - xw[t + 1, B, H]"))
    bad = tuple(replace(t, ranks=("B", "D")) if t.name == "pre.4" else t for t in g.tensors)
    msgs = [i.message for i in solar_io.validate(replace(g, tensors=bad, repeats=g.repeats[1:]))]
    assert any("pre.4" in m for m in msgs)


FFT_BLOCK = """format: solar-io.einsum-graph
version: "1.7"
name: spectral_steps
producer:
  tool: solar-io
  tool_version: ""
  frontend: hand-written
ranks:
  N: 8
  F: 5
  P: 2
tensors:
- name: x.0
  ranks: [N]
  dtype: fp32
  role: input
- repeat:
    var: t
    start: 1
    step: 1
    count: 3
    tensors:
    - name: "s.{t}"
      ranks: [F, P]
      dtype: fp32
      role: intermediate
    - name: "x.{t}"
      ranks: [N]
      dtype: fp32
      role: intermediate
- name: y
  ranks: [N]
  dtype: fp32
  role: output
nodes:
- repeat:
    var: t
    start: 1
    step: 1
    count: 3
    nodes:
    - name: "s.{t}"
      kind: fft
      op: aten._fft_r2c
      inputs:
      - "x.{t-1}"
      output: "s.{t}"
      fft:
        type: r2c
        dims: [0]
        inverse: false
        norm: none
    - name: "x.{t}"
      kind: fft
      op: aten._fft_c2r
      inputs:
      - "s.{t}"
      output: "x.{t}"
      fft:
        type: c2r
        dims: [0]
        inverse: true
        norm: by_n
- name: y
  kind: einsum
  op: copy
  space: [N]
  inputs:
  - x.3[N]
  output: y[N]
  map: identity
  reduce: none
validation:
  status: skipped
  method: none
"""


def test_fft_nodes_in_a_repeat_block_round_trip_and_count_as_unrolled():
    """Three rfft -> irfft steps written once: the block keeps each node's fft record, loads as the unrolled
    graph, runs (each step gives x back) and counts per step 7 + 4 additions of floor, by hand."""
    g = solar_io.loads(FFT_BLOCK)
    assert [n.name for n in g.nodes] == ["s.1", "x.1", "s.2", "x.2", "s.3", "x.3", "y"]
    assert g.nodes[4].fft == g.nodes[0].fft and g.nodes[5].fft.type == "c2r"
    assert dumps(g) == FFT_BLOCK
    Draft202012Validator(SCHEMA).validate(yaml.safe_load(FFT_BLOCK))
    x = np.random.default_rng(0).standard_normal(8).astype(np.float32)
    np.testing.assert_allclose(solar_io.execute(g, {"x.0": x})["y"], x, atol=1e-5)
    assert graph_metrics(g).flops_vector == graph_metrics(repeat.unrolled(g)).flops_vector == 3 * (7 + 4)
