"""SOL-ExecBench / FlashInfer-Trace definitions: the reader (axes, constraints, specs, workload lines,
bad input) and captures through the torch frontend, with MACs and bytes derived by hand.

Every definition here is written for the test (no corpus file is vendored)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from inprocess import run_main

import solar_io
from solar_io.frontends.common.errors import CaptureError
from solar_io.frontends.trace.axes import ExprError, evaluate, resolve
from solar_io.frontends.trace.definition import DEFINITION_DTYPES, parse_definition, read_definition
from solar_io.frontends.trace.workload import BadLine, Workload, read_workloads

GEMM = {
    "name": "gemm_n64_k32", "op_type": "gemm",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 64}, "K": {"type": "const", "value": 32},
             "MN": {"type": "expr", "expression": "M * N"}, "half": {"type": "expr", "expression": "MN // 2"}},
    "constraints": ["M % 2 == 0", "K <= N"],
    "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16"}, "B": {"shape": ["N", "K"], "dtype": "float16"},
               "alpha": {"shape": None, "dtype": "float32"}},
    "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
    "reference": "import torch\n\ndef run(A, B, alpha):\n    return torch.matmul(A, B.T) * alpha\n",
}


def _problem(tmp: Path, definition: dict, lines: list, name: str = "p") -> Path:
    d = tmp / name
    d.mkdir(parents=True)
    (d / "definition.json").write_text(json.dumps(definition))
    (d / "workload.jsonl").write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return d


def _write_safetensors(path: Path, tensors: dict) -> None:
    """A .safetensors file written by hand: u64 header size, JSON header, little-endian data."""
    header, blob = {}, b""
    codes = {"int32": ("I32", "<i4"), "float32": ("F32", "<f4")}
    for key, (dtype, shape, values) in tensors.items():
        code, fmt = codes[dtype]
        raw = b"".join(struct.pack(fmt[0] + fmt[1], v) for v in values)
        header[key] = {"dtype": code, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + blob)


# ----------------------------------------------------------------------------- axes and expressions

def test_expressions_are_arithmetic_only_and_never_evaluated():
    env = {"a": 7, "b": 2}
    assert evaluate("a + b * 3 - (a // b) % 2 ** 2 + -b", env) == 7 + 6 - (3 % 4) - 2
    assert evaluate("a / b", env) == 3.5
    assert evaluate("a == b * 3 + 1 and not a < b", env, logical=True) is True
    for bad in ("__import__('os').system('true')", "a.real", "[a]", "a if b else 1", "lambda: 1", "f'{a}'"):
        with pytest.raises(ExprError, match="not allowed"):
            evaluate(bad, env)
    with pytest.raises(ExprError, match="not allowed"):
        evaluate("a == b", env)  # a comparison is a constraint, not an axis value
    with pytest.raises(ExprError, match="'c', which is not an axis"):
        evaluate("a + c", env)
    with pytest.raises(ExprError, match="divides by zero"):
        evaluate("a // (b - 2)", env)


def test_axes_of_each_kind_resolve_expr_of_expr():
    d = parse_definition(GEMM, "def.json", "0" * 64)
    assert [a.kind for a in d.axes.values()] == ["var", "const", "const", "expr", "expr"]
    assert resolve(d.axes, {"M": 6}, "w:1") == {"M": 6, "N": 64, "K": 32, "MN": 384, "half": 192}
    with pytest.raises(CaptureError, match=r"w:1: axes\.M: missing"):
        resolve(d.axes, {}, "w:1")
    with pytest.raises(CaptureError, match=r"w:1: axes\.N: is a const axis"):
        resolve(d.axes, {"M": 2, "N": 3}, "w:1")
    odd = dict(GEMM, axes=dict(GEMM["axes"], h={"type": "expr", "expression": "M / 4"}))
    with pytest.raises(CaptureError, match=r"axes\.h: expression 'M / 4' gives 1.5, not a whole number"):
        resolve(parse_definition(odd, "def.json", "0" * 64).axes, {"M": 6}, "w:1")


@pytest.mark.parametrize("change, field, words", [
    (lambda d: d["axes"].update(X={"type": "expr", "expression": "M.bit_length()"}), "axes.X.expression",
     "not allowed"),
    (lambda d: d["axes"].update(X={"type": "expr", "expression": "M + Q"}), "axes.X.expression", "names Q"),
    (lambda d: d["axes"].update(X={"type": "expr", "expression": "Y + 1"}, Y={"type": "expr", "expression": "X"}),
     "axes.", "cycle"),
    (lambda d: d["axes"].update(X={"type": "konst"}), "axes.X.type", "must be one of const, var, expr"),
    (lambda d: d["axes"].update(X={"type": "const", "value": 2.5}), "axes.X.value", "non-negative integer"),
    (lambda d: d["inputs"]["A"].update(dtype="float12"), "inputs.A.dtype", "unknown dtype 'float12'"),
    # found by the fuzz test's explore profile: a list as dtype was a TypeError (unhashable), not this line
    (lambda d: d["inputs"]["A"].update(dtype=[]), "inputs.A.dtype", r"unknown dtype \[\]"),
    (lambda d: d["inputs"]["A"].update(dtype={"a": 1}), "inputs.A.dtype", "unknown dtype"),
    (lambda d: d["inputs"]["A"].update(shape=["M", "Z"]), r"inputs.A.shape\[1\]", "'Z' is not an axis"),
    (lambda d: d["constraints"].append("M ==== 2"), r"constraints\[2\]", "does not parse"),
    (lambda d: d["inputs"]["A"].update(shape=["M", "K * Q"]), r"inputs.A.shape\[1\]", "names Q, not an axis"),
    (lambda d: d.pop("axes"), "axes", "missing"),
])
def test_bad_definitions_name_the_file_and_field(tmp_path, change, field, words):
    doc = json.loads(json.dumps(GEMM))
    change(doc)
    p = tmp_path / "definition.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(CaptureError, match=rf"^{tmp_path}/definition.json: {field}.*{words}"):
        read_definition(p)


def test_specs_scalars_zero_d_literal_and_arithmetic_sizes_and_every_dtype_of_the_format():
    from solar_io.frontends.trace.inputs import shape_of

    doc = json.loads(json.dumps(GEMM))
    doc["inputs"]["pairs"] = {"shape": ["M", "2", "K // 2"], "dtype": "bfloat16"}  # sizes as the corpus writes them
    assert shape_of(parse_definition(doc, "def.json", "0" * 64).inputs["pairs"], {"M": 6, "K": 32}) == (6, 2, 16)
    doc["inputs"]["scale"] = {"shape": [], "dtype": "float32"}
    d = parse_definition(doc, "def.json", "0" * 64)
    assert d.inputs["alpha"].scalar and d.inputs["scale"].shape == () and not d.inputs["scale"].scalar
    assert d.scalars == ("alpha",)
    assert set(DEFINITION_DTYPES) == {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                           "float4_e2m1", "float4_e2m1fn_x2", "int64", "int32", "int16", "int8", "uint8", "bool"}


# ----------------------------------------------------------------------------- workload lines

def test_workload_lines_plain_trace_shaped_and_bad(tmp_path):
    (tmp_path / "blob").mkdir()
    lines = [
        {"uuid": "w0", "axes": {"M": 4}, "inputs": {"alpha": {"type": "scalar", "value": 0.5}},
         "tolerance": {"max_atol": 1e-3, "max_rtol": 1, "max_error_cap": None}},
        {"definition": GEMM["name"], "solution": None, "evaluation": None,
         "workload": {"uuid": "t1", "axes": {"M": 2}, "inputs": {"alpha": {"type": "scalar", "value": 2}}}},
        "{not json",
        {"axes": {"M": 4}, "inputs": {"alpha": {"type": "scalar", "value": 1}, "Q": {"type": "random"}}},
        {"axes": {"M": 3}, "inputs": {"alpha": {"type": "scalar", "value": 1}}},
        {"axes": {"M": 4}, "inputs": {"alpha": {"type": "scalar", "value": 1},
                                      "A": {"type": "safetensors", "path": "blob/none.safetensors",
                                            "tensor_key": "A"}}},
        {"axes": {}, "inputs": {"alpha": {"type": "scalar", "value": 1}}},
        {"axes": {"M": 2}, "inputs": {}},
        {"definition": "other", "workload": {"axes": {"M": 2}}},
        {"axes": {"M": 2}, "inputs": {"alpha": {"type": "scalar", "value": 1}, "A": {"type": "custom"}}},
    ]
    d = _problem(tmp_path, GEMM, lines)
    got = read_workloads(d / "workload.jsonl", read_definition(d / "definition.json"))
    assert [type(x) for x in got[:2]] == [Workload, Workload]
    w0, t1 = got[0], got[1]
    assert (w0.key, w0.sizes["MN"], w0.scalars(), w0.tolerance) == (
        "w0", 256, {"alpha": 0.5}, (("max_atol", 1e-3), ("max_rtol", 1.0), ("max_error_cap", None)))
    assert (t1.key, t1.sizes["M"], t1.inputs["A"].kind) == ("t1", 2, "random")
    wl = f"{d}/workload.jsonl"
    expected = [
        (3, "not JSON"),
        (4, r"inputs\.Q: not an input of gemm_n64_k32"),
        (5, r"constraints\[0\]: 'M % 2 == 0' does not hold \(M=3\)"),
        (6, r"inputs\.A\.path: 'blob/none.safetensors' is absent"),
        (7, r"axes\.M: missing"),
        (8, r"inputs\.alpha: missing \(a scalar input needs a value\)"),
        (9, r"definition: names 'other', not this definition"),
        (10, r"inputs\.A: a custom input, but the definition has no custom_inputs_entrypoint"),
    ]
    bad = got[2:]
    assert all(isinstance(b, BadLine) for b in bad)
    for b, (line, words) in zip(bad, expected, strict=True):
        assert b.line == line
        assert __import__("re").match(rf"{wl}:{line}: .*{words}", b.message), b.message
        assert "\n" not in b.message


# ----------------------------------------------------------------------------- captures

def test_gemm_capture_cli_one_graph_per_workload_hand_counts(tmp_path):
    lines = [{"uuid": "w0", "axes": {"M": 16}, "inputs": {"alpha": {"type": "scalar", "value": 0.5}},
              "tolerance": {"max_atol": 0.01}},
             {"axes": {"M": 3}, "inputs": {"alpha": {"type": "scalar", "value": 0.5}}},  # violates M % 2 == 0
             {"definition": GEMM["name"], "workload": {"axes": {"M": 8},
                                                       "inputs": {"alpha": {"type": "scalar", "value": 2.0}}}}]
    d = _problem(tmp_path, GEMM, lines)
    out = tmp_path / "graphs"
    r = run_main("capture", str(d), "-o", str(out))
    assert r.returncode == 1, r.stderr
    assert f"{d}/workload.jsonl:2: " in r.stderr and "'M % 2 == 0' does not hold (M=3)" in r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["gemm_n64_k32.2.yaml", "gemm_n64_k32.w0.yaml"]
    g = solar_io.load(out / "gemm_n64_k32.w0.yaml")
    w = g.producer.workload
    assert (g.name, g.producer.source, w.definition, w.uuid, w.index) == (
        "gemm_n64_k32", "definition.json", "gemm_n64_k32", "w0", 0)
    assert dict(w.axes) == {"M": 16, "N": 64, "K": 32, "MN": 1024, "half": 512}
    assert dict(w.tolerance) == {"max_atol": 0.01}
    assert g.validation.status == "passed"
    m = solar_io.graph_metrics(g)
    M, N, K = 16, 64, 32
    assert m.macs == M * N * K  # C = A @ B.T: one multiply-accumulate per (m, n, k)
    assert m.boundary_bytes == 2 * (M * K + N * K + M * N)  # fp16 A, B in; C out; alpha an immediate
    g2 = solar_io.load(out / "gemm_n64_k32.2.yaml")
    assert (g2.producer.workload.uuid, g2.producer.workload.index) == (None, 2)
    assert solar_io.graph_metrics(g2).macs == 8 * N * K
    assert not [a for a in g.assumptions if a.kind == "precision"]  # fp16 operands: nothing to admit


def test_a_definitions_fp32_contractions_may_run_on_16_bit_tensor_cores(tmp_path):
    """The fp32 GEMM of a definition: the graph says its contraction may run at bf16/fp16 peaks (the corpus's
    published SOLs price fp32 work so), and ``bound`` prices it there: 2 M N K FLOPs at the bf16 peak."""
    from solar_io.hardware import load_spec
    from solar_io.node_lists import fp32_at_half

    doc = json.loads(json.dumps(GEMM))
    for name in ("A", "B"):
        doc["inputs"][name]["dtype"] = "float32"
    doc["outputs"]["C"]["dtype"] = "float32"
    line = {"uuid": "w0", "axes": {"M": 16}, "inputs": {"alpha": {"type": "scalar", "value": 0.5}}}
    d = _problem(tmp_path, doc, [line])
    out = tmp_path / "graphs"
    r = run_main("capture", str(d), "-o", str(out))
    assert r.returncode == 0, r.stderr
    g = solar_io.load(out / "gemm_n64_k32.w0.yaml")
    assert fp32_at_half(g)
    (mm,) = [n for n in solar_io.bound(g, "h100-sxm").nodes if n.macs]
    assert mm.precision == "fp32->bf16"
    assert abs(mm.matrix_time - 2 * 16 * 64 * 32 / load_spec("h100-sxm").peak("matrix", "bf16")) < 1e-18


PAGED = {
    "name": "gather_rows_d8", "custom_inputs_entrypoint": "make_inputs",
    "axes": {"T": {"type": "var"}, "P": {"type": "var"}, "D": {"type": "const", "value": 8}},
    "constraints": ["T <= P"],
    "inputs": {"table": {"shape": ["P", "D"], "dtype": "float32"}, "ids": {"shape": ["T"], "dtype": "int32"},
               "w": {"shape": ["T"], "dtype": "float32"}, "scale": {"shape": [], "dtype": "float32"}},
    "outputs": {"out": {"shape": ["T", "D"], "dtype": "float32"}},
    "reference": ("import torch\n\nSEEN = []\n\ndef make_inputs(axes_and_scalars, device):\n"
                  "    SEEN.append(dict(axes_and_scalars))\n"
                  "    T, P = axes_and_scalars['T'], axes_and_scalars['P']\n"
                  "    return {'w': torch.arange(T, dtype=torch.float32, device=device) / T}\n\n"
                  "def run(table, ids, w, scale):\n"
                  "    return table[ids.long()] * w[:, None] * scale\n"),
}


def test_safetensors_custom_and_zero_d_scalar_inputs(tmp_path):
    from solar_io.frontends.trace.problems import capture_problem

    T, P, D = 4, 6, 8
    d = tmp_path / "p"
    d.mkdir()
    _write_safetensors(d / "ids.safetensors", {"ids": ("int32", [T], [5, 0, 3, 5])})
    lines = [{"uuid": "u", "axes": {"T": T, "P": P},
              "inputs": {"ids": {"type": "safetensors", "path": "ids.safetensors", "tensor_key": "ids"},
                         "w": {"type": "custom"}, "scale": {"type": "scalar", "value": 3.0}}},
             {"uuid": "k", "axes": {"T": T, "P": P},
              "inputs": {"ids": {"type": "safetensors", "path": "ids.safetensors", "tensor_key": "nope"},
                         "w": {"type": "custom"}, "scale": {"type": "scalar", "value": 3.0}}}]
    d = _problem(tmp_path, PAGED, lines, name="q")
    (d / "ids.safetensors").write_bytes((tmp_path / "p" / "ids.safetensors").read_bytes())
    ok, bad = capture_problem(d, tmp_path / "out", keep_graphs=True)
    assert ok.status == "captured" and ok.validation == "passed", ok.error
    assert bad.status == "failed" and f"{d}/workload.jsonl:2: inputs.ids: ids.safetensors has no tensor 'nope'" \
        in bad.error
    g = ok.graph
    m = solar_io.graph_metrics(g)
    # the module of the reference recorded what the generator was given: every axis and scalar input
    import sys
    mods = [v for k, v in sys.modules.items() if k.startswith("solar_io_trace_") and hasattr(v, "SEEN")]
    assert {"T": T, "P": P, "D": D}.items() <= mods[-1].SEEN[-1].items()
    assert not any(n.kind == "opaque" for n in g.nodes)
    # fused boundary: T rows of the table (the capture runs on meta, so the ids' values are unknown and a
    # gather of T indices is charged min(T, P) rows; these ids touch only 3 distinct rows: issue 18's
    # value-specialised capture would count 3), ids (int32), w, the 0-d scale, out
    assert m.boundary_bytes == 4 * (min(T, P) * D + T + T + 1 + T * D)


def test_a_corpus_folder_keeps_subsets_and_one_bad_problem_does_not_stop_the_rest(tmp_path):
    corpus = tmp_path / "corpus"
    _problem(corpus / "L1", GEMM, [{"uuid": "a", "axes": {"M": 2}, "inputs": {"alpha": {"type": "scalar",
                                                                                         "value": 1.0}}}], "gemm")
    broken = dict(GEMM, inputs=dict(GEMM["inputs"], A={"shape": ["M", "K"], "dtype": "float12"}))
    _problem(corpus / "L2", broken, ["{}"], "broken")
    r = run_main("capture", str(corpus), "-o", str(tmp_path / "g"))
    assert r.returncode == 1
    assert f"{corpus}/L2/broken/definition.json: inputs.A.dtype: unknown dtype 'float12'" in r.stderr
    assert (tmp_path / "g" / "L1" / "gemm_n64_k32.a.yaml").is_file()
    assert "1/2 workloads captured" in r.stderr


KV_UPDATE = {
    "name": "rope_kv_update_small", "custom_inputs_entrypoint": "get_inputs",
    "axes": {"S": {"type": "var"}, "H": {"type": "const", "value": 2}, "T": {"type": "const", "value": 32},
             "D": {"type": "const", "value": 8}},
    "inputs": {"key": {"shape": ["H", "S", "D"], "dtype": "bfloat16"},
               "key_cache": {"shape": ["H", "T", "D"], "dtype": "bfloat16"},
               "cache_position": {"shape": ["S"], "dtype": "int64"}},
    "outputs": {"key_scaled": {"shape": ["H", "S", "D"], "dtype": "bfloat16"},
                "key_cache_out": {"shape": ["H", "T", "D"], "dtype": "bfloat16"}},
    "reference": ("import torch\n\ndef get_inputs(axes_and_scalars, device):\n"
                  "    S = axes_and_scalars['S']\n"
                  "    return {'cache_position': torch.arange(3, 3 + S, dtype=torch.int64, device=device)}\n\n"
                  "@torch.no_grad()\n"
                  "def run(key, key_cache, cache_position):\n"
                  "    key_scaled = key * 2\n"
                  "    key_cache[:, cache_position] = key_scaled\n"
                  "    return key_scaled, key_cache\n"),
}


def test_a_reference_that_updates_its_input_in_place_moves_only_the_written_rows(tmp_path):
    """SOL-ExecBench L1/018's shape: ``run`` assigns into the cache it is given and returns it. The graph
    has the definition's two outputs (not a third whole copy), the cache output ``updates`` the input, and
    the boundary is, by hand (bf16, int64): key 2 x S x 8 in, the positions, key_scaled out, and the S rows
    per head written into the cache; not the 2 x 32 x 8 cache read and written whole."""
    from solar_io.frontends.trace.problems import capture_problem

    S = 4
    d = _problem(tmp_path, KV_UPDATE, [{"uuid": "u", "axes": {"S": S},
                                        "inputs": {"key": {"type": "random"}, "key_cache": {"type": "random"},
                                                   "cache_position": {"type": "custom"}}}])
    (r,) = capture_problem(d, None, keep_graphs=True)
    assert r.status == "captured" and r.validation == "passed", r.error
    g = r.graph
    outs = [t for t in g.tensors if t.role == "output"]
    assert [t.updates for t in outs] == [None, "key_cache"]
    rows = 2 * 2 * S * 8  # bytes of one (H, S, D) bf16 tensor
    m = solar_io.graph_metrics(g)
    assert m.macs == 0 and m.boundary_bytes == rows + 8 * S + rows + rows


def test_a_workload_whose_graph_cannot_be_written_is_not_counted_as_captured(tmp_path, monkeypatch):
    from solar_io.errors import GraphError, Issue
    from solar_io.frontends.trace import problems

    def refuse(g, path):
        raise GraphError([Issue(("ranks", "A5"), "rank A5 must have a positive integer size, got 0")], str(path))

    monkeypatch.setattr(problems, "dump", refuse)
    d = _problem(tmp_path, GEMM, [{"uuid": "a", "axes": {"M": 2}, "inputs": {"alpha": {"type": "scalar",
                                                                                      "value": 1.0}}}], "gemm")
    (r,) = problems.capture_problem(d, tmp_path / "out")
    assert r.status == "failed" and r.output is None
    assert "ranks.A5: rank A5 must have a positive integer size, got 0" in r.error


def _one_element_off(monkeypatch) -> None:
    """The whole-graph comparison's executor (``check.execute``) made wrong in one element of a [16, 64]
    output; the per-node programs' outputs (256 elements) and the pinned rerun's are left alone."""
    import numpy as np

    from solar_io.frontends.torch import check

    real = check.execute

    def one_off(*args, **kwargs):
        out = real(*args, **kwargs)
        for v in out.values():
            if isinstance(v, np.ndarray) and v.size == 16 * 64:
                v.reshape(-1)[0] += 1.0
        return out

    monkeypatch.setattr(check, "execute", one_off)


def test_a_graph_off_in_one_element_fails_and_reports_the_workloads_own_matched_ratio(tmp_path, monkeypatch):
    """No element may differ beyond solar-io's tolerance, even where the workload's own
    ``required_matched_ratio`` (0.99) would admit it: a wrong edge row is under 1% of a large output. The
    failed record reports the share the workload's tolerance finds. Here the executor's output is made
    wrong in one element of 1,024 (an fp16 GEMM: no quantised tensor to pin)."""
    from solar_io.frontends.trace import problems

    _one_element_off(monkeypatch)
    scalar = {"alpha": {"type": "scalar", "value": 0.5}}
    lines = [{"uuid": "loose", "axes": {"M": 16}, "inputs": scalar,
              "tolerance": {"max_atol": 1e-3, "max_rtol": 1e-3, "required_matched_ratio": 0.99}}]
    d = _problem(tmp_path, GEMM, lines)
    (loose,) = problems.capture_problem(d, tmp_path / "out")
    assert loose.status != "captured" and "validation failed" in loose.error
    assert "99.9023% of elements within the definition's own tolerance (atol 0.001 + rtol 0.001 x |reference|, " \
           "99.00% required)" in loose.error

def test_a_failed_validation_searches_for_the_diverging_node_only_within_the_budget(tmp_path, monkeypatch):
    """The search keeps every tensor of the graph and of the program (Quant/030's attention: 14 GB for a
    workload whose validation needs 1); past the budget it is skipped and the record says why."""
    import numpy as np

    from solar_io.frontends.common.validation import graph_bytes, kept_bytes
    from solar_io.frontends.torch import check
    from solar_io.frontends.trace import problems

    real = check.execute
    monkeypatch.setattr(check, "execute", lambda *a, **k: {n: v + 1.0 for n, v in real(*a, **k).items()})
    chain = {"name": "chain", "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 64}},
             "inputs": {"A": {"shape": ["M", "N"], "dtype": "float32"}},
             "outputs": {"Z": {"shape": ["M", "N"], "dtype": "float32"}},
             "reference": "def run(A):\n    x = A * 2\n    y = x.exp()\n    return (y + 1).sin()\n"}
    d = _problem(tmp_path, chain, [{"uuid": "w", "axes": {"M": 16}, "inputs": {"A": {"type": "random"}}}])
    (free,) = problems.capture_problem(d, tmp_path / "a", allow_invalid=True)
    g = solar_io.load(free.output)
    assert g.validation.status == "failed"
    assert "no node diverges from the traced program" in g.validation.reason  # searched (only the output is off)
    peak, kept = graph_bytes(g) * 2, kept_bytes(g) * 2
    assert peak < kept == 2 * 5 * 16 * 64 * 4  # A, x, y, y + 1 and Z kept: the search needs more
    (tight,) = problems.capture_problem(d, tmp_path / "b", allow_invalid=True, options={"validate_budget": peak})
    g = solar_io.load(tight.output)
    assert g.validation.status == "failed"
    assert "the first diverging node was not searched for" in g.validation.reason
    assert np.isclose(g.validation.max_abs_error, 1.0)


@pytest.mark.parametrize("case", ["pinned", "per node", "wrong quantiser", "not quantised"])
def test_a_whole_graph_off_through_a_quantised_tensor_is_checked_with_its_quantised_tensors_pinned(
        tmp_path, monkeypatch, case):
    """A graph with fp8 (or fp4) tensors that differs from eager as a whole (Quant/030: the activations' amax a
    ulp apart moves the NVFP4 scale of every element) cannot be rerun in float64. It is run again with its
    fp8/fp4, integer and boolean tensors pinned to eager's values (every float node and edge still checked at
    full size); where those values cannot be kept, each node is checked on its own; a pinned tensor whose own
    value is far from eager's fails. A graph without such tensors still fails. The first comparison's output
    is made wrong here in one element of 1,024 (the per-node programs have 256)."""
    from solar_io.frontends.torch import pinned
    from solar_io.frontends.trace import problems

    _one_element_off(monkeypatch)
    if case == "per node":
        monkeypatch.setattr(pinned, "program_values", lambda *a, **k: 1 / 0)
    if case == "wrong quantiser":  # as if the graph's fp8 cast were wrong: its values far from eager's
        to_numpy = pinned.to_numpy
        monkeypatch.setattr(pinned, "to_numpy", lambda v: to_numpy(v) + 1.0)
    cast = "" if case == "not quantised" else ".to(torch.float8_e4m3fn).to(torch.float32)"
    doc = {"name": "q", "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 64}},
           "inputs": {"A": {"shape": ["M", "N"], "dtype": "float32"}},
           "outputs": {"Z": {"shape": ["M", "N"], "dtype": "float32"}},
           "reference": f"import torch\n\ndef run(A):\n    return (A * 0.5){cast} * 2\n"}
    d = _problem(tmp_path, doc, [{"uuid": "w", "axes": {"M": 16}, "inputs": {"A": {"type": "random"}}}])
    (r,) = problems.capture_problem(d, tmp_path / "out", allow_invalid=True)
    v = solar_io.load(r.output).validation
    if case != "not quantised":
        assert "by rounding its fp8_e4m3 tensors amplify" in v.reason and "max abs error 1," in v.reason
    if case == "pinned":
        assert (v.status, v.method) == ("passed", "reference-executor pinned")
        assert "with its 1 fp8/fp4, integer and boolean tensors pinned to eager's values" in v.reason
        assert "all but at most 0.000% of its elements, every output matches" in v.reason
    elif case == "per node":
        assert (v.status, v.method) == ("passed", "reference-executor per node")
        assert dict(v.reduced_ranks) == {"D": 16}  # N = 64 checked at 16
    elif case == "wrong quantiser":
        assert (v.status, v.method) == ("failed", "reference-executor pinned")
        assert "differs from eager's in 100.00% of its elements" in v.reason
    else:
        assert (v.status, v.method) == ("failed", "reference-executor")


JOINT = {
    "name": "joint_or_single_d8", "custom_inputs_entrypoint": "get_inputs",
    "axes": {"S": {"type": "var"}, "D": {"type": "const", "value": 8}},
    "inputs": {"x": {"shape": ["S", "D"], "dtype": "float32"}, "w": {"shape": ["D", "D"], "dtype": "float32"},
               "is_joint": {"shape": None, "dtype": "int32"}},
    "outputs": {"y": {"shape": ["S", "D"], "dtype": "float32"}},
    "reference": ("import torch\n\ndef get_inputs(axes_and_scalars, device):\n"
                  "    return {'is_joint': axes_and_scalars['is_joint']}\n\n"
                  "def run(x, w, is_joint):\n"
                  "    return x @ w if is_joint == 1 else x * 2\n"),
}


def test_a_scalar_input_given_in_axes_is_the_scalars_value(tmp_path):
    """SOL-ExecBench L2/032 writes ``is_joint_block`` (a scalar input) in a line's ``axes`` and the harness
    hands it to the custom generator: each line's value picks its branch (a matmul of S x 8 x 8 MACs, or a
    scale), and the header records it with the axes. A name that is neither an axis nor a scalar input is
    still an error."""
    from solar_io.frontends.trace.problems import capture_problem

    S, D = 4, 8
    lines = [{"uuid": "j", "axes": {"S": S, "is_joint": 1}, "inputs": {"is_joint": {"type": "custom"}}},
             {"uuid": "s", "axes": {"S": S, "is_joint": 0}, "inputs": {"is_joint": {"type": "custom"}}},
             {"uuid": "t", "axes": {"S": S, "is_jont": 0}, "inputs": {"is_joint": {"type": "custom"}}}]
    joint, single, typo = capture_problem(_problem(tmp_path, JOINT, lines), None, keep_graphs=True)
    assert joint.status == single.status == "captured", (joint.error, single.error)
    assert solar_io.graph_metrics(joint.graph).macs == S * D * D and solar_io.graph_metrics(single.graph).macs == 0
    assert dict(joint.graph.producer.workload.axes) == {"S": S, "D": D, "is_joint": 1}
    assert typo.status == "failed" and "axes.is_jont: not an axis of the definition" in typo.error
