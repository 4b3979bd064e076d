"""Fuzzing the loader: random text and document mutations give a clean error or a valid graph."""

from __future__ import annotations

import contextlib
import copy
import json
import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT
from strategies import graphs

from solar_io import GraphError, check_text, dumps, loads
from solar_io.errors import Issue
from solar_io.format.encode import encode
from solar_io.format.yamltext import emit

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _outcome(text: str) -> None:
    """check_text never raises; a graph comes back exactly when no error is reported."""
    g, issues = check_text(text, "fuzz.yaml")
    assert all(isinstance(i, Issue) for i in issues)
    errors = [i for i in issues if i.severity == "error"]
    assert (g is None) == bool(errors)
    for i in errors:
        line = i.format("fuzz.yaml")
        assert "\n" not in line and line.startswith("fuzz.yaml")
    if g is not None:
        assert loads(dumps(g)) == g


@FUZZ
@given(st.data(), graphs(max_nodes=4))
def test_text_mutations(data, g):
    text = dumps(g)
    edit = st.tuples(st.sampled_from(["delete", "insert", "replace", "swap", "dup"]), st.integers(0, len(text)),
                     st.text(max_size=3))
    ops = data.draw(st.lists(edit, min_size=1, max_size=4))
    for op, pos, s in ops:
        if op == "delete":
            text = text[:pos] + text[pos + 1:]
        elif op == "insert":
            text = text[:pos] + s + text[pos:]
        elif op == "replace":
            text = text[:pos] + s + text[pos + len(s):]
        else:
            lines = text.split("\n")
            i = pos % max(1, len(lines))
            j = (i + 1) % max(1, len(lines))
            if op == "swap":
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines.insert(i, lines[i])
            text = "\n".join(lines)
    _outcome(text)


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.floats(allow_nan=False),
                    st.text(max_size=6), st.builds(list), st.builds(dict), st.builds(lambda: ["M", "Q"]),
                    st.just("A[M, K + 9]"))


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@FUZZ
@given(st.data(), graphs(max_nodes=4))
def test_document_mutations(data, g):
    doc = copy.deepcopy(encode(g))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        path = data.draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = data.draw(st.sampled_from(["delete", "replace", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "replace":
            parent[path[-1]] = data.draw(_VALUES)
        elif isinstance(parent, dict):
            parent[data.draw(st.text(min_size=1, max_size=5))] = data.draw(_VALUES)
        else:
            parent.append(data.draw(_VALUES))
    _outcome(emit(doc))
    _outcome(yaml.safe_dump(doc, default_flow_style=True))


def test_known_nasty_inputs():
    for text in ["", "\n", "---\n---\n", "!!python/object:os.system {}\n", "a: !!binary aGk=\n", "? [a]\n: b\n",
                 "format: solar-io.einsum-graph\nversion: '1.0'\nnodes: !!set {a}\n", "\ufeffa: 1\n",
                 "%YAML 1.1\n---\na: 1\n",
                 "a: 2001-02-30\n", "a: 1e999999\n", "a: !!int 99999999999999999999999999999999\n"]:
        _outcome(text)
    try:
        loads("")
    except GraphError as e:
        assert "mapping" in str(e)


# ----------------------------------------------------------------------------- issue 20: every input a user writes

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: Values a user (or a corrupted file) may put where a number or a name is expected.
NASTY = st.sampled_from([None, True, 0, -1, 1, 7, 2**62, 2**63, 2**1100, -(2**1100), 0.5, -0.0, 1e308,
                         math.inf, -math.inf, math.nan, "", "x", "nan", "1e400", "4MiB", [], {}, ["M"], {"a": 1}])


def _mutate(data, doc, values=NASTY, rounds=(1, 3)):
    """``doc`` with 1-3 random deletions, replacements by ``values`` and additions (a deep copy)."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(*rounds))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = data.draw(st.sampled_from(["delete", "replace", "replace", "add"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "replace":
            parent[path[-1]] = data.draw(values)
        elif isinstance(parent, dict):
            parent[data.draw(st.sampled_from(["peak", "capacity", "note", "zz", "shape", "value"]))] = data.draw(values)
        else:
            parent.append(data.draw(values))
    return doc


@contextlib.contextmanager
def _no_hang(what: str, seconds: float = 60):
    """Fail (not hang) when the body runs past ``seconds``."""
    from solar_io.frontends.common.errors import CaptureError
    from solar_io.frontends.common.usercode import user_code

    try:
        with user_code(what, seconds):
            yield
    except CaptureError as e:
        if "timed out" in str(e):
            raise AssertionError(f"hang: {e}") from None
        raise


def _spec_outcome(text: str) -> None:
    """A spec text loads as a spec of finite positive numbers, or fails with one HardwareSpecError line."""
    from solar_io.hardware.spec import HardwareSpecError, load_spec_file

    try:
        spec = load_spec_file("fuzz.yaml", text=text)
    except HardwareSpecError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.yaml"), str(e)
        return
    numbers = [p.value for peaks in spec.units.values() for p in peaks.values()]
    numbers += [x for m in spec.memory for x in (m.capacity, m.bandwidth) if x is not None]
    assert all(math.isfinite(x) and x > 0 for x in numbers), numbers


L4_TEXT = (ROOT / "hardware" / "l4.yaml").read_text()


@FAST
@given(st.data())
def test_hardware_spec_mutations(data):
    doc = yaml.safe_load(L4_TEXT)
    with _no_hang("spec"):
        _spec_outcome(emit(_mutate(data, doc)))


@FAST
@given(st.data())
def test_hardware_spec_text_mutations(data):
    text = L4_TEXT
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        text = text[:pos] + data.draw(st.sampled_from(["", "x", ".nan", "-", "1e400", ": ", "\n", "[", "9" * 40]))\
            + text[pos + data.draw(st.integers(0, 3)):]
    with _no_hang("spec"):
        _spec_outcome(text)


GEMM_DEFINITION = {
    "name": "gemm", "op_type": "gemm",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 8}, "K": {"type": "const", "value": 4},
             "MN": {"type": "expr", "expression": "M * N"}},
    "constraints": ["M % 2 == 0", "K <= N"],
    "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16"}, "B": {"shape": ["N", "K"], "dtype": "float16"},
               "alpha": {"shape": None, "dtype": "float32"}},
    "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
    "reference": "import torch\n\ndef run(A, B, alpha):\n    return torch.matmul(A, B.T) * alpha\n",
}
GEMM_LINE = {"uuid": "w0", "axes": {"M": 4}, "inputs": {"alpha": {"type": "scalar", "value": 0.5}},
             "tolerance": {"max_atol": 1e-3, "max_rtol": 1}}
TRACE_VALUES = st.one_of(NASTY, st.sampled_from(["M", "M * N", "M // 0", "2 ** 200", "K +", "__import__('os')",
                                                 "float16", "bfloat16", "var", "const", "expr", "scalar", "random"]))


@FAST
@given(st.data())
def test_definition_and_workload_mutations(data):
    """SOL-ExecBench-style definitions and workload lines: a Definition / Workload or one CaptureError line."""
    from solar_io.frontends.common.errors import CaptureError
    from solar_io.frontends.trace.definition import parse_definition
    from solar_io.frontends.trace.workload import parse_workload_line

    doc = _mutate(data, GEMM_DEFINITION, TRACE_VALUES)
    with _no_hang("definition"):
        try:
            defn = parse_definition(doc, "d.json", "0" * 64)
        except CaptureError as e:
            assert "\n" not in str(e) and str(e).startswith("d.json"), str(e)
            defn = parse_definition(GEMM_DEFINITION, "d.json", "0" * 64)
        line = json.dumps(_mutate(data, GEMM_LINE, TRACE_VALUES), allow_nan=True)
        try:
            parse_workload_line(line, defn, Path("w.jsonl"), 1, 0)
        except CaptureError as e:
            assert "\n" not in str(e) and str(e).startswith("w.jsonl:1"), str(e)


MATMUL_PATH = str(ROOT / "examples" / "graphs" / "matmul.yaml")
OPTION_VALUES = st.sampled_from(["nan", "inf", "-inf", "1e400", "-1", "0", "1e-400", "abc", "", "4MiB", "2G",
                                 "3.1ms", "500Hz", "l4", "l4@nanMHz", "l4@1e400MHz", "h100-pcie", "json", "yaml",
                                 "9" * 400, "mm", "x" * 3000])
COMMANDS = {
    "bound": (["bound", MATMUL_PATH], ["--hw", "--measured", "--capacity", "--target-rate", "--target-latency",
                                       "--launch-overhead", "--format", "--clock", "--top", "--microbatches",
                                       "--dtype", "--parallel", "--bogus"]),
    "tiling": (["tiling", MATMUL_PATH, "--hw", "l4"], ["--node", "--capacity", "--hw"]),
    "sweep": (["sweep", MATMUL_PATH, "-o", "{out}"], ["--hw", "--timeout", "--vary", "--set"]),
    "hw": (["hw", "show"], ["--format"]),
    "info": (["info"], []),
}


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-out")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_command_line_options(out_dir, data):
    """Random option values on the main commands: exit 0, or 1/2 with one-line errors; never a traceback or an
    internal error, never a hang (outputs go to a temporary folder)."""
    from inprocess import run_main

    name = data.draw(st.sampled_from(sorted(COMMANDS)))
    base, options = COMMANDS[name]
    args = [a.format(out=out_dir) for a in base]
    for _ in range(data.draw(st.integers(0 if options else 1, 3))):
        if options:
            args += [data.draw(st.sampled_from(options)), data.draw(OPTION_VALUES)]
        else:
            args.append(data.draw(OPTION_VALUES))
    with _no_hang(" ".join(args)[:200], 120):
        r = run_main(*args)
    out = r.stdout + r.stderr
    assert r.returncode in (0, 1, 2), (args, r.returncode, out[-3000:])
    assert "Traceback" not in out and "internal error" not in out, (args, out[-3000:])
    if r.returncode:
        lines = r.stderr.splitlines()
        assert lines and max(len(ln) for ln in lines) < 1500, (args, r.stderr[-3000:])  # one capped line each
