"""SOL-ExecBench corpus shapes (issue 17): tied top-k routing, packed fp4 weights, a GQA paged decode
over a page table (value-specialised, given as a FlashInfer Trace-shaped line), an FFT (an fft node),
and the benchmark's matching of published leaderboard values by axes.

Every definition here is written for the test (no corpus file is vendored); counts are by hand."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

import solar_io
from solar_io.frontends.common.errors import CaptureError
from solar_io.frontends.trace.definition import read_definition
from solar_io.frontends.trace.problems import capture_problem


def _problem(tmp: Path, definition: dict, lines: list, name: str = "p") -> Path:
    d = tmp / name
    d.mkdir(parents=True)
    (d / "definition.json").write_text(json.dumps(definition))
    (d / "workload.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return d


def _one(d: Path):
    (r,) = capture_problem(d, None, keep_graphs=True)
    assert r.status == "captured", r.error
    return r


# ----------------------------------------------------------------------------- tied top-k

TIED_TOPK = {
    "name": "tied_topk_gate_e8_k2", "custom_inputs_entrypoint": "make_inputs",
    "axes": {"T": {"type": "var"}, "E": {"type": "const", "value": 8}, "K": {"type": "const", "value": 2}},
    "inputs": {"scores": {"shape": ["T", "E"], "dtype": "float32"}},
    "outputs": {"idx": {"shape": ["T", "K"], "dtype": "int64"}, "w": {"shape": ["T", "K"], "dtype": "float32"}},
    "reference": ("import torch\n\n"
                  "def make_inputs(axes_and_scalars, device):\n"
                  "    T, E = axes_and_scalars['T'], axes_and_scalars['E']\n"
                  "    # three distinct values over eight experts: most rows tie at their top-2\n"
                  "    s = (torch.arange(T * E, device=device).reshape(T, E) * 7 % 3).float()\n"
                  "    return {'scores': s}\n\n"
                  "def run(scores):\n"
                  "    w, idx = torch.topk(scores, k=2, dim=-1, sorted=False)\n"
                  "    w = w / w.sum(dim=-1, keepdim=True)\n"
                  "    return idx, w\n"),
}


def test_tied_top_k_validates_against_the_indices_eager_chose(tmp_path):
    """Rows whose top-2 scores tie: any order of the tied experts is a valid top-k, so the graph's
    selection takes the eager run's own choice (issue 18's replay) and the indices compare exactly."""
    T, E, K = 6, 8, 2
    d = _problem(tmp_path, TIED_TOPK, [{"uuid": "t", "axes": {"T": T}, "inputs": {"scores": {"type": "custom"}}}])
    r = _one(d)
    assert r.validation == "passed" and not r.opaque
    m = solar_io.graph_metrics(r.graph)
    assert m.macs == 0
    # scores in (fp32), both outputs out: int64 indices and fp32 weights
    assert m.boundary_bytes == 4 * T * E + 8 * T * K + 4 * T * K


# ----------------------------------------------------------------------------- packed fp4

FP4_GEMM = {
    "name": "nvfp4_gemm_n16_k64",
    "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 16}, "K": {"type": "const", "value": 64},
             "K_half": {"type": "expr", "expression": "K // 2"}, "K_blocks": {"type": "expr", "expression": "K // 16"}},
    "inputs": {"x": {"shape": ["M", "K"], "dtype": "bfloat16"},
               "w": {"shape": ["N", "K_half"], "dtype": "float4_e2m1fn_x2"},
               "w_scale": {"shape": ["N", "K_blocks"], "dtype": "float8_e4m3fn"}},
    "outputs": {"y": {"shape": ["M", "N"], "dtype": "bfloat16"}},
    "reference": ("import torch\n"
                  "E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]\n\n"
                  "def run(x, w, w_scale):\n"
                  "    b = w.view(torch.uint8)\n"
                  "    lut = torch.tensor(E2M1, dtype=torch.float32, device=x.device)\n"
                  "    lo, hi = lut[(b & 0x0F).long()], lut[(b >> 4).long()]\n"
                  "    wf = torch.stack([lo, hi], dim=-1).reshape(b.shape[0], -1)\n"
                  "    s = w_scale.to(torch.float32).repeat_interleave(16, dim=1)\n"
                  "    return (x.float() @ (wf * s).T).to(torch.bfloat16)\n"),
}


def test_packed_fp4_bytes_are_exact_and_unpacking_is_lowered(tmp_path):
    M, N, K = 8, 16, 64
    d = _problem(tmp_path, FP4_GEMM, [{"uuid": "a", "axes": {"M": M},
                                       "inputs": {n: {"type": "random"} for n in ("x", "w", "w_scale")}}])
    r = _one(d)
    assert r.validation == "passed" and not r.opaque  # nibble mask and shift are lowered, not opaque
    g = r.graph
    w = next(t for t in g.tensors if t.role == "input" and g.shape(t.name) == (N, K // 2))
    assert w.dtype == "uint8"  # one byte per element: two fp4 values
    m = solar_io.graph_metrics(g)
    assert m.macs == M * N * K
    # bf16 x, packed w (K/2 bytes a row), one fp8 scale per 16 values, bf16 y, the 16-entry fp32 table
    assert m.boundary_bytes == 2 * M * K + N * K // 2 + N * K // 16 + 2 * M * N + 4 * 16


def test_an_and_with_a_mask_that_is_no_power_of_two_stays_opaque_and_listed(tmp_path):
    doc = json.loads(json.dumps(FP4_GEMM))
    doc["reference"] = doc["reference"].replace("b & 0x0F", "b & 0x0E")
    d = _problem(tmp_path, doc, [{"uuid": "a", "axes": {"M": 2},
                                  "inputs": {n: {"type": "random"} for n in ("x", "w", "w_scale")}}])
    (r,) = capture_problem(d, None, keep_graphs=True)
    assert r.opaque == ["aten.bitwise_and"] or any("bitwise_and" in o for o in r.opaque), r.opaque


# ----------------------------------------------------------------------------- paged decode

PAGED_DECODE = {
    "name": "gqa_paged_decode_h4_kv2_d8_ps1", "custom_inputs_entrypoint": "make_inputs",
    "axes": {"batch_size": {"type": "var"}, "num_qo_heads": {"type": "const", "value": 4},
             "num_kv_heads": {"type": "const", "value": 2}, "head_dim": {"type": "const", "value": 8},
             "num_pages": {"type": "var"}, "page_size": {"type": "const", "value": 1},
             "len_indptr": {"type": "expr", "expression": "batch_size + 1"}, "num_kv_indices": {"type": "var"}},
    # the second names a tensor's values, as FlashInfer's definitions do: kept, never evaluated
    "constraints": ["num_qo_heads % num_kv_heads == 0", "num_kv_indices == kv_indptr[-1].item()"],
    "inputs": {"q": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
               "k_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
               "v_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
               "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
               "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
               "sm_scale": {"shape": None, "dtype": "float32"}},
    "outputs": {"output": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"}},
    "reference": (
        "import torch\n\n"
        "def make_inputs(axes_and_scalars, device):\n"
        "    return {'kv_indptr': torch.tensor([0, 3, 8], dtype=torch.int32, device=device),\n"
        "            'kv_indices': torch.tensor([9, 2, 4, 0, 1, 7, 3, 5], dtype=torch.int32, device=device)}\n\n"
        "@torch.no_grad()\n"
        "def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):\n"
        "    B, H, D = q.shape\n"
        "    G = H // k_cache.shape[2]\n"
        "    out = torch.zeros(B, H, D, dtype=torch.bfloat16, device=q.device)\n"
        "    for b in range(B):\n"
        "        s, e = int(kv_indptr[b].item()), int(kv_indptr[b + 1].item())\n"
        "        idx = kv_indices[s:e].long()\n"
        "        kb = k_cache.squeeze(1)[idx].float().repeat_interleave(G, dim=1)\n"
        "        vb = v_cache.squeeze(1)[idx].float().repeat_interleave(G, dim=1)\n"
        "        p = torch.softmax(torch.einsum('hd,thd->ht', q[b].float(), kb) * sm_scale, dim=-1)\n"
        "        out[b] = torch.einsum('ht,thd->hd', p, vb).to(torch.bfloat16)\n"
        "    return out\n"),
}


def test_gqa_paged_decode_over_a_page_table_from_a_trace_shaped_line(tmp_path):
    """The page table's values decide each sequence's length (3 and 5 pages): the capture specialises
    them (recorded as an assumption) and counts each sequence's own work."""
    B, H, Hkv, D, P, lens = 2, 4, 2, 8, 10, (3, 5)
    inputs = {"q": {"type": "random"}, "k_cache": {"type": "random"}, "v_cache": {"type": "random"},
              "kv_indptr": {"type": "custom"}, "kv_indices": {"type": "custom"},
              "sm_scale": {"type": "scalar", "value": 0.35}}
    line = {"definition": PAGED_DECODE["name"], "solution": None, "evaluation": None,  # FlashInfer's Trace shape
            "workload": {"uuid": "t0", "axes": {"batch_size": B, "num_pages": P, "num_kv_indices": sum(lens)},
                         "inputs": inputs}}
    d = _problem(tmp_path, PAGED_DECODE, [line])
    defn = read_definition(d / "definition.json")
    assert defn.constraints == ("num_qo_heads % num_kv_heads == 0",)
    assert defn.value_constraints == ("num_kv_indices == kv_indptr[-1].item()",)
    r = _one(d)
    g = r.graph
    assert r.validation == "passed" and not r.opaque
    assert g.producer.workload.uuid == "t0"
    assert any(a.kind == "specialised" for a in g.assumptions)
    m = solar_io.graph_metrics(g)
    assert m.macs == 2 * H * D * sum(lens)  # q.k and p.v: H*D MACs per head and cached token, each
    # fused boundary (each root's largest single read, a lower bound on the union of its reads): of each
    # cache the longest sequence's pages, of q one batch row, of the page ids the longest slice; of the
    # output, handed in zero-filled (prefilled), one batch row: each row is its own scatter into the zeros
    # and the file does not say where, so the largest (a lower bound on their union); new memory: all of it
    page = Hkv * D * 2
    reads = 2 * max(lens) * page + H * D * 2 + 4 * max(lens)
    assert m.boundary_bytes == reads + H * D * 2
    fresh = dataclasses.replace(g, tensors=tuple(dataclasses.replace(t, prefilled=None) for t in g.tensors))
    assert solar_io.graph_metrics(fresh).boundary_bytes == reads + B * H * D * 2


def test_value_constraints_still_parse_and_axis_constraints_still_hold(tmp_path):
    bad = json.loads(json.dumps(PAGED_DECODE))
    bad["constraints"] = ["num_kv_indices == kv_indptr[-1].item("]
    p = tmp_path / "definition.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(CaptureError, match=r"definition.json: constraints\[0\]: .*does not parse"):
        read_definition(p)
    line = {"uuid": "x", "axes": {"batch_size": 2, "num_pages": 10, "num_kv_indices": 8},
            "inputs": {"sm_scale": {"type": "scalar", "value": 1.0}}}
    doc = dict(PAGED_DECODE, axes=dict(PAGED_DECODE["axes"], num_kv_heads={"type": "const", "value": 3}))
    (r,) = capture_problem(_problem(tmp_path, doc, [line], "odd"), None)
    assert r.status == "failed" and "'num_qo_heads % num_kv_heads == 0' does not hold" in r.error


# ----------------------------------------------------------------------------- FFT

FFT = {
    "name": "rfft_pad2_d4",
    "axes": {"B": {"type": "var"}, "L": {"type": "const", "value": 16}, "F": {"type": "expr", "expression": "L + 1"}},
    "inputs": {"x": {"shape": ["B", "L"], "dtype": "float32"}},
    "outputs": {"re": {"shape": ["B", "F"], "dtype": "float32"}, "im": {"shape": ["B", "F"], "dtype": "float32"}},
    "reference": ("import torch\n\ndef run(x):\n    f = torch.fft.rfft(x, n=2 * x.shape[-1])\n"
                  "    return f.real.contiguous(), f.imag.contiguous()\n"),
}


def test_an_fft_is_captured_as_one_fft_node_with_its_floor(tmp_path):
    """L1/007's shape: rfft with zero padding to 2L. Captured and validated; the transform is one fft
    node (no opaque node) charged the additions of its zero-frequency sum, 2L - 1 per row; the fused
    bytes are x in and both parts of the L + 1 frequencies out, by hand."""
    B, L = 2, 16
    d = _problem(tmp_path, FFT, [{"uuid": "f", "axes": {"B": B}, "inputs": {"x": {"type": "random"}}}])
    r = _one(d)
    assert r.validation == "passed"
    assert not r.opaque
    (fft,) = [n for n in r.graph.nodes if n.kind == "fft"]
    assert (fft.op, fft.fft.type, fft.fft.dims) == ("aten._fft_r2c", "r2c", (1,))
    m = solar_io.graph_metrics(r.graph)
    assert m.boundary_bytes == 4 * B * L + 2 * 4 * B * (L + 1) and m.macs == 0
    assert m.flops_vector == B * (2 * L - 1)


# ----------------------------------------------------------------------------- published values

def _bench_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sol_execbench", ROOT / "benchmarks" / "sol_execbench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_published_values_match_by_axes_and_keep_the_strictest():
    mod = _bench_module()
    entries = [{"axes": {"M": 4, "N": 8}, "sol_ms": 0.5, "baseline_latency_ms": 2.0},
               {"axes": {"M": 4, "N": 8}, "sol_ms": 0.4, "baseline_latency_ms": 3.0},  # same axes, other inputs
               {"axes": {"M": 2, "N": 8}, "sol_ms": 0.1, "baseline_latency_ms": 0.2}]
    assert mod.match_published(entries, {"M": 4, "N": 8, "K": 3}) == (0.4e-3, 2.0e-3)
    assert mod.match_published(entries, {"M": 3, "N": 8}) == (None, None)


def test_the_report_counts_a_violating_workload_once():
    """A workload whose fused and cache-aware SOLs both exceed its baseline is one violating workload (two
    lines), not two of the workloads measured."""
    row = {"subset": "L1", "captured": True, "opaque": 0, "capture_s": 1.0, "bound_s": 0.1}
    rows = [{**row, "problem": "L1/a", "key": "u1", "fused": 2e-3, "cache": 2e-3, "baseline": 1e-3},
            {**row, "problem": "L1/a", "key": "u2", "fused": 1e-3, "cache": 1e-3, "baseline": 3e-3}]
    text = _bench_module().report({"rows": rows, "failures": []}, "b200", "cmd")
    assert "1 of 2 workloads with a measured baseline (2 lines below)" in text


def test_rows_without_times_are_left_out_of_the_median_and_the_rows_file_reads_back():
    """Rows rebuilt from an earlier report carry no seconds (``capture_s`` null): the median is over the
    timed rows (3 s of 1 s and 3 s and 5 s), and the count of timed rows is printed beside it. The rows file
    is JSON with one row a line."""
    import json

    mod = _bench_module()
    row = {"subset": "L1", "problem": "L1/a", "captured": True, "opaque": 0, "bound_s": 0.0}
    rows = [{**row, "key": f"u{i}", "capture_s": s} for i, s in enumerate([1.0, None, 3.0, None, 5.0])]
    text = mod.report({"rows": rows, "failures": []}, "b200", "cmd")
    assert "| L1 | 5 | 5 | 0 | 3 | 3.00 | 5.00 |" in text
    dumped = mod.dump_rows(rows)
    assert json.loads(dumped) == {"rows": rows} and len(dumped.splitlines()) == len(rows) + 2


def test_a_compressed_rows_file_reads_back_and_the_per_problem_table_finds_the_nearest_violation(tmp_path):
    """A ``.gz`` rows file is the same rows; the per-problem table counts a problem's violating workload once
    and gives its smallest baseline over the larger bound (cache-aware 3 ms over a 2 ms baseline: 0.667)."""
    mod = _bench_module()
    row = {"subset": "L1", "captured": True, "opaque": 0, "capture_s": 1.0, "bound_s": 0.0}
    rows = [{**row, "problem": "L1/a", "key": "u1", "fused": 1e-3, "cache": 3e-3, "baseline": 2e-3},
            {**row, "problem": "L1/a", "key": "u2", "fused": 1e-3, "cache": 1e-3, "baseline": 4e-3},
            {**row, "problem": "L1/b", "key": "u3", "fused": 1e-3, "cache": 1e-3, "baseline": None, "capture_s": None}]
    mod.write_rows(tmp_path / "rows.json.gz", rows)
    assert mod.read_rows(tmp_path / "rows.json.gz") == {"rows": rows}
    text = mod.report({"rows": rows, "failures": []}, "b200", "cmd", per_problem=True)
    assert "| L1/a | 2 | 2 | 0 | 1 | 0.667 | - | 1.00 |" in text
    assert "| L1/b | 1 | 1 | 0 | 0 | - | - | - |" in text and "## Workloads" not in text


def test_a_sampled_problems_rows_stand_for_its_lines_in_the_median():
    """``--sample 4`` of a 40-line problem times 4 rows, each standing for 10 workloads (``weight``): the
    corpus median is then stratified by problem, not carried by the fully timed problems beside it."""
    mod = _bench_module()
    row = {"subset": "L1", "captured": True, "opaque": 0, "bound_s": 0.0}
    full = [{**row, "problem": "L1/a", "key": f"a{i}", "capture_s": 9.0} for i in range(6)]
    sampled = [{**row, "problem": "L1/b", "key": f"b{i}", "capture_s": 1.0, "weight": 10.0} for i in range(4)]
    text = mod.report({"rows": full + sampled, "failures": []}, "b200", "cmd")
    assert "| L1 | 10 | 10 | 0 | 10 | 1.00 | 9.00 |" in text  # 40 workloads at 1 s against 6 at 9 s
    assert mod.weighted_median([(t, 1.0) for t in (1.0, 2.0, 3.0, 4.0)]) == 2.5  # unweighted: the usual median


def test_the_benchmark_captures_only_the_keys_asked_with_the_budget_given(tmp_path, monkeypatch):
    """``--keys`` runs the named workloads of a problem alone; ``--validate-budget`` reaches the capture (a
    budget of 1 byte validates the FFT per node at reduced sizes, the default runs it whole)."""
    mod = _bench_module()
    methods = []

    def recording(*args, **kwargs):
        results = capture_problem(*args, **kwargs)
        methods.extend(r.graph.validation.method for r in results if r.graph is not None)
        return results

    monkeypatch.setattr(mod, "capture_problem", recording)
    lines = [{"uuid": u, "axes": {"B": b}, "inputs": {"x": {"type": "random"}}} for u, b in (("u1", 2), ("u2", 3))]
    _problem(tmp_path / "corpus" / "L1", FFT, lines, name="007_fft")
    corpus = tmp_path / "corpus"
    data = mod.run(corpus, "b200", None, None, "floor", only=["L1/007_fft"], keys=["u2"], validate_budget=1)
    (row,) = data["rows"]
    assert row["key"] == "u2" and row["captured"] and row["opaque"] == 0
    assert row["boundary_bytes"] == 4 * 3 * 16 + 2 * 4 * 3 * 17
    whole = mod.run(corpus, "b200", None, None, "floor", only=["L1/007_fft"])
    assert [r["key"] for r in whole["rows"]] == ["u1", "u2"]
    assert methods == ["reference-executor per node", "reference-executor", "reference-executor"]


def test_a_budget_that_does_not_read_is_a_usage_error_not_a_traceback():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sol_execbench.py"), "corpus", "--validate-budget",
                        "2XB"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--validate-budget: cannot read '2XB' as a size in bytes" in r.stderr
