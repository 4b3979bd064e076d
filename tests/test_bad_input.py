"""Every kind of bad input gives one clear line naming the file, field and problem, exit 1,
no traceback, and leaves files untouched."""

from __future__ import annotations

import pytest
import yaml

from solar_io import FORMAT_VERSION, GraphError, loads

BASE = """\
format: solar-io.einsum-graph
version: '1.0'
producer:
  tool: solar-io
  tool_version: 0.1.0
  frontend: hand-written
ranks:
  M: 4
  N: 6
  K: 8
tensors:
- name: A
  ranks: [M, K]
  dtype: bf16
  role: input
- name: B
  ranks: [K, N]
  dtype: bf16
  role: weight
- name: C
  ranks: [M, N]
  dtype: bf16
  role: output
nodes:
- name: mm
  kind: einsum
  op: aten.mm
  space: [M, N, K]
  inputs:
  - A[M, K]
  - B[K, N]
  output: C[M, N]
  map: mul
  reduce: add
validation:
  status: skipped
  method: none
"""

CONV = """\
format: solar-io.einsum-graph
version: '1.0'
producer: {tool: solar-io, tool_version: 0.1.0, frontend: hand-written}
ranks: {N: 1, C: 2, H: 8, W: 8, K: 3, P: 4, Q: 4, R: 3, S: 3}
tensors:
- {name: x, ranks: [N, C, H, W], dtype: fp32, role: input}
- {name: w, ranks: [K, C, R, S], dtype: fp32, role: weight}
- {name: y, ranks: [N, K, P, Q], dtype: fp32, role: output}
nodes:
- name: conv
  kind: einsum
  op: aten.convolution
  space: [N, K, P, Q, C, R, S]
  inputs: ['x[N, C, 2*P + R - 1, 2*Q + S - 1]', 'w[K, C, R, S]']
  output: y[N, K, P, Q]
  map: mul
  reduce: add
  pad: {x: {H: [1, 1], W: [1, 1]}}
validation: {status: skipped, method: none}
"""

# (name, text, expected substring of the one-line message, expected path or None)
CASES = [
    ("not_yaml", "format: [unclosed\n  - : :\n", "not valid YAML", None),
    ("list", "- 1\n- 2\n", "must be a YAML mapping, got a list", None),
    ("scalar", "42\n", "must be a YAML mapping, got an integer", None),
    ("missing_field", BASE.replace("  dtype: bf16\n  role: weight\n", "  role: weight\n"),
     "missing required field 'dtype'", "tensors[1]"),
    ("unknown_field", BASE.replace("  map: mul\n", "  map: mul\n  colour: red\n"), "unknown field 'colour'",
     "nodes[0].colour"),
    ("wrong_type", BASE.replace("  M: 4\n", "  M: four\n"), "positive integer size", "ranks.M"),
    ("wrong_type_list", BASE.replace("  space: [M, N, K]\n", "  space: M\n"), "must be a list", "nodes[0].space"),
    ("zero_rank", BASE.replace("  M: 4\n", "  M: 0\n"), "positive integer size", "ranks.M"),
    ("negative_rank", BASE.replace("  N: 6\n", "  N: -6\n"), "positive integer size", "ranks.N"),
    ("undeclared_rank", BASE.replace("  space: [M, N, K]\n", "  space: [M, N, K, Z]\n"),
     "rank Z is not declared", "nodes[0].space[3]"),
    ("undeclared_tensor_rank", BASE.replace("  ranks: [M, N]\n", "  ranks: [M, Y]\n"),
     "rank Y is not declared", "tensors[2].ranks[1]"),
    ("cycle", BASE.replace("  role: output\n", "  role: output\n- name: D\n  ranks: [M, N]\n  dtype: bf16\n"
                           "  role: intermediate\n")
     .replace("  - A[M, K]\n", "  - A[M, K]\n  - D[M, N]\n").replace("  map: mul\n  reduce: add\n",
                                                                  "  map: mul\n  reduce: add\n", 1)
     .replace("validation:", "- name: back\n  kind: einsum\n  op: copy\n  space: [M, N]\n  inputs:\n"
              "  - C[M, N]\n  output: D[M, N]\n  map: identity\n  reduce: none\nvalidation:"),
     "cycle: mm -> back -> mm", "nodes[0]"),
    ("produced_twice", BASE.replace("validation:", "- name: mm2\n  kind: einsum\n  op: aten.mm\n"
                                    "  space: [M, N, K]\n  inputs:\n  - A[M, K]\n  - B[K, N]\n"
                                    "  output: C[M, N]\n  map: mul\n  reduce: add\nvalidation:"),
     "tensor C is already produced by node mm", "nodes[1]"),
    ("index_out_of_bounds", BASE.replace("  - A[M, K]\n", "  - A[M, K + 1]\n"),
     "index K + 1 of A dim K spans [1, 8], outside [0, 7]", "nodes[0].inputs[0]"),
    ("conv_padding_off_by_one", CONV.replace("{H: [1, 1], W: [1, 1]}", "{H: [1, 0], W: [1, 1]}")
     .replace("H: 8, W: 8", "H: 7, W: 8"), "spans [-1, 7], outside [-1, 6]", "nodes[0].inputs[0]"),
    ("unknown_dtype", BASE.replace("  dtype: bf16\n  role: weight\n", "  dtype: bf17\n  role: weight\n"),
     "unknown dtype 'bf17'", "tensors[1].dtype"),
    ("version_2", BASE.replace("version: '1.0'", "version: '2.0'"), "version 2.0 is newer than this solar-io reads",
     "version"),
    ("version_one", BASE.replace("version: '1.0'", "version: one"), "version must be a string 'MAJOR.MINOR'",
     "version"),
    ("version_float", BASE.replace("version: '1.0'", "version: 1.0"), "version must be a string 'MAJOR.MINOR'",
     "version"),
    ("wrong_format", BASE.replace("format: solar-io.einsum-graph", "format: onnx"), "format must be", "format"),
    ("bad_expression", BASE.replace("  - A[M, K]\n", "  - A[M, K*K]\n"), "bad index expression",
     "nodes[0].inputs[0]"),
    ("wrong_arity", BASE.replace("  map: mul\n", "  map: exp\n"),
     "map exp takes 1 inputs (besides index tensors read through @name), got 2", "nodes[0].inputs"),
    ("duplicate_key", BASE.replace("  map: mul\n", "  map: mul\n  map: add\n"), "duplicate key 'map'", None),
    ("role_mismatch", BASE.replace("  dtype: bf16\n  role: output\n", "  dtype: bf16\n  role: input\n"),
     "has role input but node mm produces it", "tensors[2].role"),
    ("deep_nesting", "a: " + "[" * 100000 + "]" * 100000 + "\n", "", None),
    ("binary_garbage", "\x00\x01\x02 format", "", None),
]


@pytest.mark.parametrize("name,text,message,path", CASES, ids=[c[0] for c in CASES])
def test_api_rejects(name, text, message, path):
    with pytest.raises(GraphError) as e:
        loads(text, "bad.yaml")
    assert message in str(e.value)
    if path is not None:
        assert any(i.where() == path for i in e.value.issues), [i.where() for i in e.value.issues]
    assert str(e.value).startswith("bad.yaml")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name,text,message,path", CASES, ids=[c[0] for c in CASES])
def test_cli_check_and_fmt_reject(tmp_path, cli, name, text, message, path):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    before = f.read_bytes()
    r = cli("check", str(f))
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert "Traceback" not in out
    first = out.splitlines()[0]
    assert first.startswith(f"{f}:"), first
    if path is not None:
        line, where = first[len(str(f)) + 1:].split(": ", 2)[:2]
        assert line.isdigit(), first
        assert where == path or path in out
    assert message in out
    r = cli("fmt", str(f))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f.read_bytes() == before  # nothing written


def test_line_numbers_point_at_the_field(tmp_path, cli):
    text = BASE.replace("  dtype: bf16\n  role: weight\n", "  dtype: bf17\n  role: weight\n")
    f = tmp_path / "g.yaml"
    f.write_text(text)
    r = cli("check", str(f))
    line = int(r.stdout.split(":")[1])
    assert text.splitlines()[line - 1].strip() == "dtype: bf17"


def test_billion_laughs_is_refused_quickly(tmp_path, cli):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 12):
        bomb += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]\n"
    with pytest.raises(GraphError, match="aliases and anchors are not allowed"):
        loads(bomb, "bomb.yaml")
    f = tmp_path / "bomb.yaml"
    f.write_text(bomb)
    r = cli("check", str(f))
    assert r.returncode == 1 and "aliases and anchors are not allowed" in r.stdout


def test_oversized_file_is_refused_before_reading(tmp_path, cli):
    f = tmp_path / "huge.yaml"
    with open(f, "wb") as fh:
        fh.truncate(100 * 1024 * 1024)
    r = cli("check", str(f))
    assert r.returncode == 1
    assert "over the" in r.stdout and "byte limit" in r.stdout


def test_missing_file(cli, tmp_path):
    r = cli("info", str(tmp_path / "nope.yaml"))
    assert r.returncode == 1 and "cannot read" in r.stderr and "Traceback" not in r.stderr


def test_every_problem_reported(tmp_path, cli):
    text = BASE.replace("  M: 4\n", "  M: 0\n")
    text = text.replace("  dtype: bf16\n  role: weight\n", "  dtype: x\n  role: weight\n")
    f = tmp_path / "g.yaml"
    f.write_text(text)
    r = cli("check", str(f))
    assert len([ln for ln in r.stdout.splitlines() if ln.startswith(str(f))]) == 2


def test_newer_minor_version_is_read_with_warning():
    text = BASE.replace("version: '1.0'", "version: '1.7'").replace("  map: mul\n", "  map: mul\n  future: 1\n")
    g = loads(text)
    assert g.version == FORMAT_VERSION and g.nodes[0].map == "mul"  # a newer minor is read as the current one


def test_valid_base_cases_load():
    assert loads(BASE).nodes[0].name == "mm"
    assert loads(CONV).nodes[0].pad_of("x") == {"H": (1, 1), "W": (1, 1)}
    assert yaml.safe_load(BASE)["version"] == "1.0"
