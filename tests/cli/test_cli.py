"""The solar-io command line: check, fmt, info, migrate, --version, --debug."""

from __future__ import annotations

from dataclasses import replace

from solar_io import FORMAT_VERSION, dumps, load, loads

NONCANONICAL = """\
format: "solar-io.einsum-graph"
version: '1.0'
producer: {tool: solar-io, tool_version: 0.1.0, frontend: hand-written}
ranks: {M: 3, K: 5}
tensors:
  - {name: a, ranks: [M, K], dtype: fp32, role: input}
  - {name: s, ranks: [M], dtype: fp32, role: output}
nodes:
  - name: rowsum   # a comment
    kind: einsum
    op: aten.sum
    space: [M, K]
    inputs: ['a[M, K]']
    output: 's[M]'
    map: identity
    reduce: add
validation: {status: skipped, method: none}
"""


def test_version(cli):
    r = cli("--version")
    assert r.returncode == 0 and "solar-io" in r.stdout and f"format {FORMAT_VERSION}" in r.stdout


def test_check_ok_and_exit_codes(cli, tmp_path, matmul_text):
    good = tmp_path / "good.yaml"
    good.write_text(matmul_text)
    bad = tmp_path / "bad.yaml"
    bad.write_text(matmul_text.replace("dtype: bf16", "dtype: bf99", 1))
    assert cli("check", str(good)).returncode == 0
    r = cli("check", str(good), str(bad))
    assert r.returncode == 1
    assert f"{good}: ok" in r.stdout and f"{bad}:" in r.stdout and "bf99" in r.stdout


def test_fmt_rewrites_canonically_and_is_idempotent(cli, tmp_path):
    f = tmp_path / "g.yaml"
    f.write_text(NONCANONICAL)
    assert cli("fmt", "--check", str(f)).returncode == 1
    assert f.read_text() == NONCANONICAL  # --check writes nothing
    r = cli("fmt", str(f))
    assert r.returncode == 0 and "reformatted" in r.stdout
    text = f.read_text()
    assert "# a comment" not in text and "{" not in text and "\n- name: rowsum\n" in text
    assert text == dumps(loads(NONCANONICAL))
    assert cli("fmt", "--check", str(f)).returncode == 0
    r = cli("fmt", str(f))
    assert "reformatted" not in r.stdout and f.read_text() == text


def test_info_reports_hand_counts(cli, tmp_path, matmul_text):
    f = tmp_path / "m.yaml"
    f.write_text(matmul_text)
    r = cli("info", str(f))
    assert r.returncode == 0
    m, n, k = 1024, 2048, 4096
    assert f"MACs:         {m * n * k} " in r.stdout
    assert f"FLOPs:        {2 * m * n * k} " in r.stdout
    assert f"bytes:        {2 * (m * k + k * n + m * n)} " in r.stdout


def test_info_warns_about_opaque_compute(cli, tmp_path):
    text = NONCANONICAL.replace("""    kind: einsum
    op: aten.sum
    space: [M, K]
    inputs: ['a[M, K]']
    output: 's[M]'
    map: identity
    reduce: add""", """    kind: opaque
    op: mylib.fancy
    inputs: [a]
    outputs: [s]
    reason: no lowering for mylib.fancy""")
    f = tmp_path / "o.yaml"
    f.write_text(text)
    r = cli("info", str(f))
    assert r.returncode == 0
    assert "unknown compute: rowsum" in r.stdout and "opaque" in r.stderr


def test_migrate_rewrites_current_version(cli, tmp_path):
    f = tmp_path / "g.yaml"
    f.write_text(NONCANONICAL)
    out = tmp_path / "new.yaml"
    r = cli("migrate", str(f), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert f.read_text() == NONCANONICAL and load(out) == replace(load(f), version=FORMAT_VERSION)
    assert cli("fmt", "--check", str(out)).returncode == 0
    newer = tmp_path / "v2.yaml"
    newer.write_text(NONCANONICAL.replace("version: '1.0'", "version: '2.0'"))
    r = cli("migrate", str(newer))
    assert r.returncode == 1 and "newer than this solar-io reads" in r.stderr and "Traceback" not in r.stderr


def test_debug_shows_traceback(cli, tmp_path):
    missing = str(tmp_path / "missing.yaml")
    assert "Traceback" not in cli("info", missing).stderr
    assert "Traceback" in cli("--debug", "info", missing).stderr


def test_check_with_the_published_json_schema(cli, tmp_path, matmul_text):
    f = tmp_path / "m.yaml"
    f.write_text(matmul_text)
    r = cli("check", "--json-schema", str(f))
    assert r.returncode == 0 and r.stdout.strip() == f"{f}: ok"
