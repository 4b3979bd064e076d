"""Every kind of bad input gives one clear line naming the file, field and problem, exit 1,
no traceback, and leaves files untouched."""

from __future__ import annotations

import pytest
import yaml
from inprocess import run_main
from paths import ROOT

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
def test_cli_check_and_fmt_reject(tmp_path, name, text, message, path):
    """In process (``run_main``: the CLI's exit status and output; two fresh interpreters per case took
    0.55 s, mostly imports); the real processes' exit status is checked by the tests below."""
    cli = run_main
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
    text = BASE.replace("version: '1.0'", "version: '1.99'").replace("  map: mul\n", "  map: mul\n  future: 1\n")
    from solar_io.errors import GraphWarning

    with pytest.warns(GraphWarning) as caught:
        g = loads(text)
    assert [str(w.message) for w in caught] == [
        f"<graph>:2: version: warning: version 1.99 is newer than this solar-io reads in full ({FORMAT_VERSION}): "
        f"fields it added are ignored; fmt and migrate refuse to rewrite the file (--allow-newer rewrites it as "
        f"{FORMAT_VERSION}, dropping them)",
        "<graph>: warning: 1 field(s) of the newer version ignored: nodes[0].future"]
    assert g.version == FORMAT_VERSION and g.nodes[0].map == "mul"  # a newer minor is read as the current one


def test_valid_base_cases_load():
    assert loads(BASE).nodes[0].name == "mm"
    assert loads(CONV).nodes[0].pad_of("x") == {"H": (1, 1), "W": (1, 1)}
    assert yaml.safe_load(BASE)["version"] == "1.0"


# ----------------------------------------------------------------------------- issue 20: bad inputs

MATMUL = (ROOT / "examples" / "graphs" / "matmul.yaml").read_text()
L4 = (ROOT / "hardware" / "l4.yaml").read_text()


def _one_line(r, code: int = 1) -> str:
    """The single stderr line of a failed run (no traceback, no box), after checking the exit status."""
    assert r.returncode == code, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr[-2000:]
    return lines[0]


@pytest.mark.parametrize("size, message", [
    (2**62 + 1, "rank M must have a positive integer size at most 2**62"),
    (2**64, "rank M must have a positive integer size at most 2**62"),
    (2**62, "mm has 38685626227668133590597632 iteration points, over the 2**63 limit of int64 indices"),
])
def test_rank_sizes_are_capped_for_int64_indices(size, message):
    text = MATMUL.replace("  M: 1024\n", f"  M: {size}\n")
    with pytest.raises(GraphError) as e:
        loads(text, "huge.yaml")
    assert any(message in line for line in e.value.lines()), e.value.lines()


def test_schema_caps_rank_sizes():
    from solar_io.resources import schema_issues

    doc = yaml.safe_load(MATMUL)
    doc["ranks"]["M"] = 2**62 + 1
    assert any(path == ("ranks", "M") for path, _ in schema_issues(doc))
    doc["ranks"]["M"] = 2**62
    assert not [p for p, _ in schema_issues(doc) if p == ("ranks", "M")]


def test_divisors_come_from_prime_factors_in_bounded_time():
    import math

    from solar_io.backends.tiling.einsum import divisors

    def brute(n):
        small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
        return sorted(set(small + [n // d for d in small]))

    for n in list(range(1, 400)) + [720720, 999983 * 2, 2**20 * 3**5, 1000003 * 1000033]:
        assert divisors(n) == brute(n), n
    assert divisors(2**62) == [2**k for k in range(63)]
    p = 2**31 - 1  # a square of a prime: trial division would run to 2**31
    assert divisors(p * p) == [1, p, p * p]
    assert divisors(2**61 - 1) == [1, 2**61 - 1]  # a Mersenne prime


def test_bound_and_tiling_finish_on_a_rank_of_2_to_the_62(tmp_path):
    """A rank whose divisor search by trial division never ended (the worst case: the square of the prime
    2**31 - 1); bound and tiling now finish (the time limit is only a hang guard)."""
    from solar_io.frontends.common.usercode import user_code

    f = tmp_path / "big.yaml"
    f.write_text(MATMUL.replace("  M: 1024\n", f"  M: {(2**31 - 1) ** 2}\n").replace("  N: 2048\n", "  N: 1\n")
                 .replace("  K: 4096\n", "  K: 1\n"))
    with user_code("bound of a rank of (2**31 - 1)**2", 300):
        assert run_main("check", str(f)).returncode == 0
        r = run_main("bound", str(f), "--hw", "l4")
        assert r.returncode == 0, r.stderr[-2000:]
        r = run_main("tiling", str(f), "--hw", "l4", "--node", "mm")
        assert r.returncode == 0, r.stderr[-2000:]


# (name, text, expected substring, path): numbers no field can hold
NUMBER_CASES = [
    ("max_abs_error 2**1100", BASE.replace("  method: none\n", f"  method: none\n  max_abs_error: {2**1100}\n"),
     "outside the int64 range", "validation.max_abs_error"),
    ("fill 2**1100", CONV.replace("  pad: {x", f"  fill: {2**1100}\n  pad: {{x"), "too large for a float",
     "nodes[0].fill"),
    ("constant 2**1100", BASE.replace("  dtype: bf16\n  role: weight\n", f"  dtype: bf16\n  role: constant\n"
                                      f"  value: {2**1100}\n"), "too large for a float", "tensors[1].value"),
    ("seed 2**100", BASE.replace("  method: none\n", f"  method: none\n  seed: {2**100}\n"), "int64",
     "validation.seed"),
    ("pad 2**80", CONV.replace("{H: [1, 1], W: [1, 1]}", f"{{H: [{2**80}, 1], W: [1, 1]}}"), "int64",
     "nodes[0].pad.x.H[0]"),
    ("density inf", BASE.replace("  role: weight\n", "  role: weight\n  density: .inf\n"), "finite number",
     "tensors[1].density"),
]


@pytest.mark.parametrize("name, text, message, path", NUMBER_CASES, ids=[c[0] for c in NUMBER_CASES])
def test_numbers_no_field_can_hold_are_refused(name, text, message, path):
    with pytest.raises(GraphError) as e:
        loads(text, "bad.yaml")
    assert message in str(e.value) and any(i.where() == path for i in e.value.issues), str(e.value)


def test_data_values_keep_nan_and_infinities():
    """-inf fills (max-pool padding), NaN constants (uninitialised memory) stay readable."""
    assert loads(CONV.replace("  pad: {x", "  fill: -.inf\n  pad: {x")).nodes[0].fill == float("-inf")
    g = loads(BASE.replace("  dtype: bf16\n  role: weight\n", "  dtype: bf16\n  role: constant\n  value: .nan\n"))
    assert g.tensors[1].value != g.tensors[1].value


@pytest.mark.parametrize("edit, field", [
    (("bandwidth: 3.0e+11", "bandwidth: .nan"), "memory/0/bandwidth"),
    (("capacity: 2.4e+10", "capacity: .nan"), "memory/0/capacity"),
    (("peak: 1.21e+14", "peak: .inf"), "units/matrix/bf16/peak"),
    (("peak: 1.21e+14", f"peak: {2**1100}"), "units/matrix/bf16/peak"),
])
def test_hardware_specs_refuse_non_finite_numbers(tmp_path, edit, field):
    from solar_io.hardware.spec import HardwareSpecError, load_spec_file

    assert edit[0] in L4
    f = tmp_path / "chip.yaml"
    f.write_text(L4.replace(edit[0], edit[1], 1))
    with pytest.raises(HardwareSpecError, match=f"field {field}: .* is not a finite number"):
        load_spec_file(f)
    for fmt in ("table", "json"):
        line = _one_line(run_main("bound", str(ROOT / "examples/graphs/matmul.yaml"), "--hw", str(f), "--format", fmt))
        assert field in line


def test_capacity_option_refuses_huge_and_nan():
    m = str(ROOT / "examples/graphs/matmul.yaml")
    for value in ("1e400", "nan", "inf"):
        assert "--capacity" in _one_line(run_main("bound", m, "--hw", "l4", "--capacity", value))


def _limited(*args: str):
    """``solar-io ARGS`` in a process of at most 4 GiB of address space (reading /dev/zero whole fails fast)."""
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    return subprocess.run([sys.executable, "-m", "solar_io", *args], capture_output=True, text=True, timeout=120,
                          preexec_fn=limit)


def test_no_file_is_read_past_the_limit(tmp_path):
    r = _limited("check", "/dev/zero")  # reading it whole would never end (and exhaust memory)
    assert r.returncode == 1 and "over the" in r.stdout and "byte limit" in r.stdout, r.stderr[-500:]
    assert "/dev/zero: file is over the" in _one_line(_limited("capture", "/dev/zero"))
    assert "larger than" in _one_line(run_main("bound", str(ROOT / "examples/graphs/matmul.yaml"), "--hw", "/dev/zero"))


def test_max_bytes_is_a_size_read_by_the_common_parser(tmp_path, monkeypatch):
    f = tmp_path / "g.yaml"
    f.write_text(MATMUL)
    monkeypatch.setenv("SOLAR_IO_MAX_BYTES", "64MiB")
    assert run_main("check", str(f)).returncode == 0
    monkeypatch.setenv("SOLAR_IO_MAX_BYTES", "100B")
    r = run_main("check", str(f))
    assert r.returncode == 1 and "over the 100 byte limit" in r.stdout
    for bad in ("abc", "-1", "0.5"):
        monkeypatch.setenv("SOLAR_IO_MAX_BYTES", bad)
        assert "SOLAR_IO_MAX_BYTES" in _one_line(run_main("check", str(f)))


def test_fmt_writes_through_a_symlink_and_keeps_the_mode(tmp_path):
    real = tmp_path / "real.yaml"
    real.write_text(MATMUL.replace('version: "1.0"', "version: '1.0'"))
    real.chmod(0o600)
    link = tmp_path / "link.yaml"
    link.symlink_to(real.name)
    r = run_main("fmt", str(link))
    assert r.returncode == 0 and "reformatted" in r.stdout
    assert link.is_symlink() and real.read_text() == MATMUL and (real.stat().st_mode & 0o777) == 0o600


def test_hardware_specs_are_written_through_a_symlink_and_keep_the_mode(tmp_path):
    from solar_io.hardware import load_spec
    from solar_io.hardware.spec import write_spec

    real, link = tmp_path / "real.yaml", tmp_path / "chip.yaml"
    real.write_text("old")
    real.chmod(0o640)
    link.symlink_to(real.name)
    write_spec(load_spec("l4"), link)
    assert link.is_symlink() and real.read_text().startswith("format: solar-io.hardware")
    assert real.stat().st_mode & 0o777 == 0o640


NEWER = MATMUL.replace('version: "1.0"', 'version: "1.999"').replace("  map: mul\n", "  map: mul\n  future: 1\n")


def test_newer_minor_files_are_warned_about_and_not_rewritten(tmp_path):
    f = tmp_path / "newer.yaml"
    f.write_text(NEWER)
    for args in (["check", str(f)], ["info", str(f)], ["bound", str(f), "--hw", "l4"],
                 ["export", "timeloop", str(f), "-o", str(tmp_path / "tl")]):
        r = run_main(*args)
        assert r.returncode == 0 and "version 1.999 is newer" in r.stdout + r.stderr, (args, r.stderr)
    assert f"format 1.999, read as {FORMAT_VERSION}" in run_main("info", str(f)).stdout
    for command in ("fmt", "migrate"):
        line = _one_line(run_main(command, str(f)))
        assert command in line and "--allow-newer" in line and f.read_text() == NEWER
    r = run_main("fmt", "--allow-newer", str(f))
    assert r.returncode == 0 and f"version: \"{FORMAT_VERSION}\"" in f.read_text() and "future" not in f.read_text()


def test_export_to_an_existing_file_is_one_line(tmp_path):
    f = tmp_path / "taken"
    f.write_text("x")
    for target in ("timeloop", "accelforge"):
        line = _one_line(run_main("export", target, str(ROOT / "examples/graphs/matmul.yaml"), "-o", str(f)))
        assert str(f) in line and "not a folder" in line
    assert f.read_text() == "x"


def test_echoed_content_is_capped(tmp_path):
    f = tmp_path / "g.yaml"
    f.write_text(BASE.replace("  ranks: [M, K]\n", "  ranks: [" + ", ".join(["M"] * 200_000) + "]\n", 1))
    r = run_main("check", str(f))
    assert r.returncode == 1 and max(len(ln) for ln in r.stdout.splitlines()) < 1200


def test_usage_errors_are_one_line_and_help_is_unchanged(cli):
    m = str(ROOT / "examples/graphs/matmul.yaml")
    for args, words in ((["bound", m, "--hw", "l4", "--bogus"], "No such option: --bogus"),
                        (["bound"], "Missing argument 'GRAPH'"), (["nosuch"], "No such command 'nosuch'"),
                        (["bound", m, "--hw"], "requires an argument")):
        line = _one_line(run_main(*args), code=2)
        assert line.startswith("error: ") and words in line and "╭" not in line
    r = run_main("bound", "--help")
    assert r.returncode == 0 and "Usage: solar-io bound" in r.stdout and "--hw" in r.stdout
    r = cli()  # the help as typer prints it, in a real process
    assert r.returncode == 2 and "Usage: solar-io" in r.stdout and not r.stderr.strip()


def test_import_os_torch_is_a_torch_source(tmp_path):
    from solar_io.frontends.select import detect_frontend

    p = tmp_path / "m.py"
    p.write_text("import os, torch\n")
    assert detect_frontend(p) == "torch"
    p.write_text("import numpy as np\nfrom os import path\nif True:\n    import jax.numpy as jnp\n")
    assert detect_frontend(p) == "jax"


MODEL = "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        {body}\n\n\n" \
        "def get_inputs():\n    return [torch.randn(2, 3)]\n"


def test_user_code_limits_time_and_turns_exits_into_errors():
    import time

    from solar_io.frontends.common.errors import CaptureError
    from solar_io.frontends.common.usercode import user_code

    t0 = time.monotonic()
    with pytest.raises(CaptureError, match=r"^m\.py: capture timed out after 0\.5 s"):
        with user_code("m.py", 0.5):
            while True:
                try:
                    time.sleep(0.01)
                except Exception:  # noqa: BLE001 - a model that swallows errors still stops
                    pass
    assert time.monotonic() - t0 < 60
    with pytest.raises(CaptureError, match=r"^outer: capture timed out after 0\.5 s"):  # nested: the outer limit holds
        with user_code("outer", 0.5):
            with user_code("inner", 30):
                pass
            while True:
                time.sleep(0.01)
    for exc, words in ((SystemExit(0), "sys.exit(0)"), (KeyboardInterrupt(), "KeyboardInterrupt")):
        with pytest.raises(CaptureError, match=words.replace("(", r"\(").replace(")", r"\)")):
            with user_code("m.py", 5):
                raise exc


@pytest.mark.parametrize("body, words", [("sys.exit(0)", "called sys.exit(0)"),
                                         ("raise KeyboardInterrupt", "raised KeyboardInterrupt")])
def test_capture_of_a_model_that_exits_is_an_error(tmp_path, body, words):
    src = tmp_path / "m.py"
    src.write_text("import sys\n" + MODEL.format(body=body))
    line = _one_line(run_main("capture", str(src), "-o", str(tmp_path / "m.yaml")))
    assert line.startswith("error: m.py: ") and words in line and not (tmp_path / "m.yaml").exists()


def test_capture_timeout_ends_a_looping_model_and_a_folder_goes_on(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "a_loop.py").write_text("import torch\n\nwhile True:\n    pass\n")
    (folder / "b_ok.py").write_text(MODEL.format(body="return x * 2"))
    line = _one_line(run_main("capture", str(folder / "a_loop.py"), "-o", str(tmp_path / "a.yaml"), "--timeout", "1"))
    assert "a_loop.py: capture timed out after 1 s (--timeout" in line and not (tmp_path / "a.yaml").exists()
    r = run_main("capture", str(folder), "-o", str(tmp_path / "out"), "--timeout", "10")
    assert r.returncode == 1 and "a_loop.py: capture timed out after 10 s" in r.stderr
    assert (tmp_path / "out" / "b_ok.yaml").exists() and not (tmp_path / "out" / "a_loop.yaml").exists()
    for bad in ("nan", "-1", "inf"):
        assert "--timeout" in _one_line(run_main("capture", str(folder / "b_ok.py"), "--timeout", bad))


def test_capture_never_writes_a_file_check_refuses(tmp_path):
    """An empty slice gives a rank of size 0 (no reader accepts it): not written, with or without
    --allow-invalid, and not printed."""
    src = tmp_path / "m.py"
    src.write_text(MODEL.format(body="return x[:, :0]"))
    for extra in ([], ["--allow-invalid"]):
        r = run_main("capture", str(src), "-o", str(tmp_path / "m.yaml"), *extra)
        assert r.returncode == 1 and "graph not written" in r.stderr and not (tmp_path / "m.yaml").exists()
    r = run_main("capture", str(src))
    assert r.returncode == 1 and "graph not written" in r.stderr and "format:" not in r.stdout


def test_dump_refuses_a_graph_no_reader_accepts(tmp_path):
    import dataclasses

    from solar_io import dump

    g = loads(BASE)
    bad = dataclasses.replace(g, ranks=tuple((r, 0 if r == "M" else n) for r, n in g.ranks))
    with pytest.raises(GraphError, match="graph not written"):
        dump(bad, tmp_path / "g.yaml")
    assert not (tmp_path / "g.yaml").exists()
