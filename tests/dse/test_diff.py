"""``solar-io diff``: structural changes, totals old vs new (hand-derived), regression exit codes."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

import solar_io
from solar_io.cli.main import main
from solar_io.dse.diff import DiffError, diff_graphs, parse_threshold

BASE = """\
format: solar-io.einsum-graph
version: "1.0"
name: linear
producer:
  tool: solar-io
  tool_version: 0.1.0
  frontend: hand-written
ranks:
  M: 64
  N: 32
  K: 128
tensors:
- name: A
  ranks: [M, K]
  dtype: bf16
  role: input
- name: B
  ranks: [K, N]
  dtype: bf16
  role: weight
- name: bias
  ranks: [N]
  dtype: bf16
  role: weight
- name: C
  ranks: [M, N]
  dtype: bf16
  role: intermediate
- name: Y
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
- name: add_bias
  kind: einsum
  op: aten.add
  space: [M, N]
  inputs:
  - C[M, N]
  - bias[N]
  output: Y[M, N]
  map: add
  reduce: none
validation:
  status: skipped
  method: none
"""

# No bias any more: Y = C * 0.5 (an immediate); B stored in fp8.
SCALED = BASE.replace("""- name: bias
  ranks: [N]
  dtype: bf16
  role: weight
""", """- name: half
  ranks: []
  dtype: bf16
  role: constant
  value: 0.5
""").replace("""- name: add_bias
  kind: einsum
  op: aten.add
  space: [M, N]
  inputs:
  - C[M, N]
  - bias[N]
  output: Y[M, N]
  map: add
  reduce: none""", """- name: scaled
  kind: einsum
  op: aten.mul
  space: [M, N]
  inputs:
  - C[M, N]
  - half[]
  output: Y[M, N]
  map: mul
  reduce: none""").replace("""- name: B
  ranks: [K, N]
  dtype: bf16""", """- name: B
  ranks: [K, N]
  dtype: fp8_e4m3""")


def write(tmp_path, name: str, text: str):
    p = tmp_path / name
    p.write_text(text)
    return p


def run(args: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_added_removed_changed_tensors_and_nodes():
    d = diff_graphs(solar_io.loads(BASE), solar_io.loads(SCALED))
    names = {(c.kind, c.status): sorted(x.name for x in d.of(c.kind, c.status)) for c in d.changes}
    assert names == {("tensor", "removed"): ["bias"], ("tensor", "added"): ["half"],
                     ("tensor", "changed"): ["B"], ("node", "removed"): ["add_bias"], ("node", "added"): ["scaled"]}
    (b,) = d.of("tensor", "changed")
    assert b.fields == (("dtype", "bf16", "fp8_e4m3"),)
    assert d.of("rank") == []


def test_shape_role_op_and_access_changes():
    new = (BASE.replace("  M: 64", "  M: 128")
           .replace("- name: bias\n  ranks: [N]\n  dtype: bf16\n  role: weight", "- name: bias\n  ranks: [N]\n"
                    "  dtype: bf16\n  role: input")
           .replace("op: aten.add", "op: aten.add_")
           .replace("  - C[M, N]\n  - bias[N]", "  - bias[N]\n  - C[M, N]"))
    d = diff_graphs(solar_io.loads(BASE), solar_io.loads(new))
    assert [(c.name, c.fields) for c in d.of("rank")] == [("M", (("size", "64", "128"),))]
    fields = {c.name: {f for f, _, _ in c.fields} for c in d.of("tensor", "changed")}
    assert fields == {"A": {"shape"}, "C": {"shape"}, "Y": {"shape"}, "bias": {"role"}}
    assert dict((c.name, c) for c in d.of("tensor"))["A"].fields == (("shape", "[M=64, K=128]", "[M=128, K=128]"),)
    (n,) = d.of("node", "changed")
    assert n.name == "add_bias" and {f for f, _, _ in n.fields} == {"op", "inputs"}


def test_totals_match_hand_counts():
    """mm: 64*32*128 = 262144 MACs; add_bias: 64*32 = 2048 vector adds. bf16 bytes: mm reads A 16384,
    B 8192, writes C 4096; add_bias reads C 4096, bias 64, writes Y 4096: 36928 unfused; boundary A + B +
    bias + Y = 28736. Scaled: B in fp8 (4096 bytes), the immediate 0.5 costs no bytes, mul is 1 FLOP."""
    d = diff_graphs(solar_io.loads(BASE), solar_io.loads(SCALED))
    rows = {x.key: x for x in d.deltas}
    assert (rows["macs"].old, rows["macs"].new, rows["macs"].percent) == (262144, 262144, 0.0)
    assert (rows["flops_vector"].old, rows["flops_vector"].new) == (2048, 2048)
    assert (rows["bytes"].old, rows["bytes"].new) == (36928, 36928 - 4096 - 64)
    assert (rows["boundary_bytes"].old, rows["boundary_bytes"].new) == (28736, 28736 - 4096 - 64)
    assert "sol_unfused" not in rows


def test_sol_totals_are_the_roofline_bounds():
    old, new = solar_io.loads(BASE), solar_io.loads(SCALED)
    d = diff_graphs(old, new, "h100-sxm")
    rows = {x.key: x for x in d.deltas}
    for g, side in ((old, "old"), (new, "new")):
        r = solar_io.bound(g, "h100-sxm")
        assert getattr(rows["sol_unfused"], side) == r.unfused.time
        assert getattr(rows["sol_fused"], side) == r.fused.time


def test_threshold_parsing():
    assert parse_threshold("5%") == pytest.approx(0.05) and parse_threshold("12.5") == pytest.approx(0.125)
    with pytest.raises(DiffError, match="--fail-on-regression"):
        parse_threshold("five")


def test_regression_exit_codes(tmp_path, capsys):
    old = write(tmp_path, "old.yaml", BASE)
    big = write(tmp_path, "big.yaml", BASE.replace("  M: 64", "  M: 128"))  # MACs x2
    code, out, err = run(["diff", str(old), str(big), "--fail-on-regression", "5%"], capsys)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and "MACs grew by 100.00%" in lines[0] and "big.yaml" in lines[0]
    assert "ranks: 0 added, 0 removed, 1 changed" in out
    assert run(["diff", str(old), str(big), "--fail-on-regression", "150%"], capsys)[0] == 0
    assert run(["diff", str(big), str(old), "--fail-on-regression", "5%"], capsys)[0] == 0  # it shrank
    assert run(["diff", str(old), str(big)], capsys)[0] == 0  # no threshold: a report only
    code, _, err = run(["diff", str(old), str(big), "--hw", "h100-sxm", "--fail-on-regression", "5%"], capsys)
    assert code == 1 and err.count("\n") == 1 and "SOL unfused on h100-sxm grew" in err


def test_json_document(tmp_path, capsys):
    old, new = write(tmp_path, "old.yaml", BASE), write(tmp_path, "new.yaml", SCALED)
    code, out, _ = run(["diff", str(old), str(new), "--json", "--hw", "thor", "--fail-on-regression", "1%"], capsys)
    doc = json.loads(out)
    assert doc["hardware"] == "jetson-agx-thor" and doc["changes"]["node"]["added"] == ["scaled"]
    assert {t["key"] for t in doc["totals"]} >= {"macs", "bytes", "sol_unfused", "sol_fused"}
    assert code == (1 if doc["regressions"] else 0)


def test_files_of_different_format_versions(tmp_path, capsys):
    old = write(tmp_path, "old.yaml", BASE)
    new = write(tmp_path, "new.yaml", BASE.replace('version: "1.0"', 'version: "1.1"'))
    code, out, _ = run(["diff", str(old), str(new), "--fail-on-regression", "0%"], capsys)
    assert code == 0 and "tensors: 0 added, 0 removed, 0 changed" in out and "nodes: 0 added" in out


def test_missing_file_is_one_line(tmp_path):
    old = write(tmp_path, "old.yaml", BASE)
    r = run_cli("diff", str(old), str(tmp_path / "missing.yaml"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "missing.yaml" in r.stderr


def test_a_prefilled_output_is_a_changed_tensor_and_its_bytes_move():
    """The 1.8 golden with and without ``prefilled``: the output is changed in that field alone, and the
    boundary drops from the whole 16 x 4 bf16 output (128 B) to its 3 scattered rows (24 B)."""
    import dataclasses

    from paths import ROOT

    new = solar_io.load(ROOT / "tests" / "golden" / "v1.8" / "prefilled_scatter.yaml")
    old = dataclasses.replace(new, tensors=tuple(dataclasses.replace(t, prefilled=None) for t in new.tensors))
    d = diff_graphs(old, new)
    assert [(c.name, c.fields) for c in d.changes] == [("to_1", (("prefilled", "None", "0.0"),))]
    assert d.old.boundary_bytes - d.new.boundary_bytes == 128 - 24
