"""The dequant rule through table lookups (issue 17): an operand unpacked from packed fp4 bytes by a
16-entry table and scaled is priced at the fp4 peak, and a chip without its origin's class prices it
at the fastest class it lists that holds the origin's values. An embedding lookup is not a dequant.

Every figure is derived by hand from the spec's datasheet peaks and the shapes below.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from solar_io import loads
from solar_io.backends.roofline import bound
from solar_io.backends.roofline.table import render
from solar_io.format.yamltext import emit
from solar_io.hardware import load_spec

B200 = load_spec("b200")
FP4 = B200.peak("matrix", "fp4")  # dense 9 PFLOP/s (the spec's source: sparse 18 halved)
TF32 = B200.peak("matrix", "tf32")
V32 = B200.peak("vector", "fp32")
BW = B200.dram_bandwidth


def close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


def build(ranks: dict[str, int], tensors: list[tuple], nodes: list[dict]):
    """A validated hand-written graph; tensors are (name, ranks, dtype, role[, value])."""
    ts = []
    for t in tensors:
        d = {"name": t[0], "ranks": t[1].split(), "dtype": t[2], "role": t[3]}
        if len(t) > 4:
            d["value"] = t[4]
        ts.append(d)
    return loads(emit({
        "format": "solar-io.einsum-graph", "version": "1.3", "name": "lut",
        "producer": {"tool": "solar-io", "tool_version": "0.1.0", "frontend": "hand-written"},
        "ranks": dict(ranks), "tensors": ts, "nodes": nodes, "validation": {"status": "skipped", "method": "none"}}))


def ew(name: str, space: str, inputs: list[str], output: str, map_: str, reduce: str = "none") -> dict:
    return {"name": name, "kind": "einsum", "op": f"aten.{name}", "space": space.split(), "inputs": inputs,
            "output": output, "map": map_, "reduce": reduce}


def view(name: str, src: str, dst: str) -> dict:
    return {"name": name, "kind": "data_movement", "op": "aten.view", "movement": "reshape", "view": True,
            "inputs": [src], "output": dst}


def unpack(x: str, rows: str) -> tuple[list[tuple], list[dict]]:
    """``x`` [rows, K2] uint8 (two fp4 codes a byte) and its fp8 scales [rows, KB] -> ``x_w`` [rows, K]
    fp32, as a reference writes it: nibbles by ``& 15`` and ``>> 4``, ``lut[codes]``, stacked, one
    scale per 16 values."""
    r = rows
    tensors = [(x, f"{r} K2", "uint8", "input"), (f"{x}_s", f"{r} KB", "fp8_e4m3", "input"),
               (f"{x}_lo", f"{r} K2", "uint8", "intermediate"), (f"{x}_hi", f"{r} K2", "uint8", "intermediate"),
               (f"{x}_loi", f"{r} K2", "int64", "intermediate"), (f"{x}_hii", f"{r} K2", "int64", "intermediate"),
               (f"{x}_lof", f"{r} K2", "fp32", "intermediate"), (f"{x}_hif", f"{r} K2", "fp32", "intermediate"),
               (f"{x}_lo3", f"{r} K2 U", "fp32", "intermediate"), (f"{x}_hi3", f"{r} K2 U", "fp32", "intermediate"),
               (f"{x}_st", f"{r} K2 TWO", "fp32", "intermediate"), (f"{x}_f", f"{r} KB KI", "fp32", "intermediate"),
               (f"{x}_sf", f"{r} KB", "fp32", "intermediate"), (f"{x}_q", f"{r} KB KI", "fp32", "intermediate"),
               (f"{x}_w", f"{r} K", "fp32", "intermediate")]
    nodes = [ew(f"{x}_and", f"{r} K2", [f"{x}[{r}, K2]", "c16[]"], f"{x}_lo[{r}, K2]", "remainder"),
             ew(f"{x}_shr", f"{r} K2", [f"{x}[{r}, K2]", "c16[]"], f"{x}_hi[{r}, K2]", "div"),
             ew(f"{x}_long_lo", f"{r} K2", [f"{x}_lo[{r}, K2]"], f"{x}_loi[{r}, K2]", "identity"),
             ew(f"{x}_long_hi", f"{r} K2", [f"{x}_hi[{r}, K2]"], f"{x}_hii[{r}, K2]", "identity"),
             {"name": f"{x}_lut_lo", "kind": "data_movement", "op": "aten.index", "movement": "copy",
              "space": [r, "K2"], "inputs": [f"lut[@{x}_loi]", f"{x}_loi[{r}, K2]"], "output": f"{x}_lof[{r}, K2]"},
             {"name": f"{x}_lut_hi", "kind": "data_movement", "op": "aten.index", "movement": "copy",
              "space": [r, "K2"], "inputs": [f"lut[@{x}_hii]", f"{x}_hii[{r}, K2]"], "output": f"{x}_hif[{r}, K2]"},
             view(f"{x}_u0", f"{x}_lof", f"{x}_lo3"), view(f"{x}_u1", f"{x}_hif", f"{x}_hi3"),
             {"name": f"{x}_stack", "kind": "data_movement", "op": "aten.stack", "movement": "concat",
              "inputs": [f"{x}_lo3", f"{x}_hi3"], "output": f"{x}_st", "axis": "TWO"},
             view(f"{x}_blocks", f"{x}_st", f"{x}_f"),
             ew(f"{x}_scale_cast", f"{r} KB", [f"{x}_s[{r}, KB]"], f"{x}_sf[{r}, KB]", "identity"),
             ew(f"{x}_scale", f"{r} KB KI", [f"{x}_f[{r}, KB, KI]", f"{x}_sf[{r}, KB]"], f"{x}_q[{r}, KB, KI]", "mul"),
             view(f"{x}_flat", f"{x}_q", f"{x}_w")]
    return tensors, nodes


def w4a4(n: int, table: int = 16):
    """C[M, N] = unpack(a) @ unpack(b)^T, M = N = K = n: both operands NVFP4-style (codes + fp8 scales)."""
    ta, na = unpack("a", "M")
    tb, nb = unpack("b", "N")
    ranks = {"M": n, "N": n, "K": n, "K2": n // 2, "KB": n // 16, "KI": 16, "U": 1, "TWO": 2, "L": table}
    tensors = [("lut", "L", "fp32", "constant"), ("c16", "", "uint8", "constant", 16.0), *ta, *tb,
               ("c", "M N", "fp32", "output")]
    nodes = [*na, *nb, ew("mm", "M N K", ["a_w[M, K]", "b_w[N, K]"], "c[M, N]", "mul", "add")]
    return build(ranks, tensors, nodes)


N = 4096


def test_a_lookup_dequantised_w4a4_gemm_runs_at_the_fp4_peak_and_says_so():
    g = w4a4(N)
    flops = 2 * N * N * N  # 2 FLOPs per MAC
    r = bound(g, "b200", cache_aware=False)
    mm = r.nodes[-1]
    assert mm.compute_dtype == "fp4" and mm.loads[0].resource == "matrix/fp4"
    assert close(mm.matrix_time, flops / FP4)  # 15.3 us: MACs / the fp4 dense peak, 2 FLOPs each
    assert mm.precision == "dequant fp4_e2m1"
    # Fused: packed codes (N*N/2 bytes each), one fp8 scale per 16 values, the 64-byte table, fp32 C;
    # the vector work (per operand: & 15 and >> 4 on each of its N*N/2 bytes, one scale multiply per
    # dequantised element; lookups move data, no FLOP) is counted but done by the block-scaled MMA:
    # no unit time.
    boundary = 2 * (N * N // 2) + 2 * (N * N // 16) + 4 * 16 + 4 * N * N
    assert r.totals.boundary_bytes == boundary and r.totals.flops_vector == 2 * (2 * (N * N // 2) + N * N)
    assert close(r.fused.time, max(flops / FP4, boundary / BW)) and r.fused.bottleneck == "matrix"
    assert dict(r.fused.unit_times)["vector"] == 0
    (rep,) = r.precision.repriced
    assert rep.rule == "dequant fp4_e2m1 -> fp4" and rep.scales == ("a_s", "b_s") and rep.folded
    assert rep.describe() == ("dequant fp4_e2m1 -> fp4: mm (table lookup: lut (16 entries, 4-bit codes of a), "
                              "lut (16 entries, 4-bit codes of b), priced as the code width's float format; "
                              "scales: a_s, b_s; chain in the contraction's kernel, its work done by the MMA: "
                              "not priced)")
    assert "by a lookup in a table of at most 256 entries" in r.precision.policy
    text = " ".join(render([r]).split())  # the printed report (wrapped) carries the assumption line
    assert "repriced " + rep.describe() in text and "by a lookup in a table of at most 256 entries" in text
    # As written the product is fp32: the tf32 peak, 18x slower than the fp4 one; the old price.
    s = bound(g, "b200", cache_aware=False, strict_dequant=True)
    assert s.nodes[-1].loads[0].resource == "matrix/tf32" and close(s.nodes[-1].matrix_time, flops / TF32)


def test_the_unpacking_chain_and_the_scale_cast_join_the_gemm_kernel():
    n = 256
    r = bound(w4a4(n), "b200", cache_aware=False, residency=False)
    (k,) = [k for k in r.kernels if k.flops_matrix > 0]
    # one kernel reads the packed codes, the fp8 scales and the table (one tensor, read once for both
    # operands) and writes C: no fp32 operand crosses DRAM
    assert k.dram_bytes == 2 * (n * n // 2) + 2 * (n * n // 16) + 4 * 16 + 4 * n * n
    assert [x.name for x in r.kernels if x.dram_bytes > 0] == [k.name]


@pytest.mark.parametrize("table, why", [
    (512, "a 512-entry table is an embedding, not a code book"),
])
def test_a_lookup_in_a_large_table_is_no_dequantisation(table, why):
    g = w4a4(256, table=table)
    r = bound(g, "b200", cache_aware=False)
    assert r.nodes[-1].compute_dtype == "fp32" and r.nodes[-1].precision == "fp32->tf32", why
    assert [x.rule for x in r.precision.repriced] == ["fp32->tf32"], why


def embedding_matmul(ids_dtype: str, vocab: int):
    """x = table[ids] (an embedding lookup: ids [T] of ``ids_dtype``, table [V, D] fp32) @ w [D, F]."""
    T, D, F = 64, 32, 48
    return build({"T": T, "D": D, "F": F, "V": vocab},
                 [("ids", "T", ids_dtype, "input"), ("table", "V D", "fp32", "weight"),
                  ("x", "T D", "fp32", "intermediate"), ("w", "D F", "fp32", "weight"), ("y", "T F", "fp32", "output")],
                 [{"name": "embed", "kind": "data_movement", "op": "aten.embedding", "movement": "copy",
                   "space": ["T", "D"], "inputs": ["table[@ids, D]", "ids[T]"], "output": "x[T, D]"},
                  ew("mm", "T F D", ["x[T, D]", "w[D, F]"], "y[T, F]", "mul", "add")])


@pytest.mark.parametrize("ids_dtype, vocab", [("int64", 32000), ("uint8", 256), ("uint8", 8)])
def test_an_embedding_lookup_is_not_reclassified(ids_dtype, vocab):
    """Rows gathered from an embedding table (even a tiny one with byte ids) keep their fp32 price."""
    r = bound(embedding_matmul(ids_dtype, vocab), "b200", cache_aware=False)
    assert r.nodes[-1].compute_dtype == "fp32" and r.nodes[-1].loads[0].resource == "matrix/tf32"
    assert [x.rule for x in r.precision.repriced] == ["fp32->tf32"]


def test_codes_read_from_a_wide_tensor_are_no_dequantisation():
    """A 16-entry table indexed by int64 values of an input: the codes are not unpacked from a packed
    source of at most 8 bits, so the gathered operand keeps fp32."""
    n = 64
    g = build({"M": n, "N": n, "K": n, "L": 16},
              [("lut", "L", "fp32", "constant"), ("idx", "M K", "int64", "input"), ("a", "M K", "fp32", "intermediate"),
               ("b", "K N", "fp32", "weight"), ("c", "M N", "fp32", "output")],
              [{"name": "lookup", "kind": "data_movement", "op": "aten.index", "movement": "copy", "space": ["M", "K"],
                "inputs": ["lut[@idx]", "idx[M, K]"], "output": "a[M, K]"},
               ew("mm", "M N K", ["a[M, K]", "b[K, N]"], "c[M, N]", "mul", "add")])
    r = bound(g, "b200", cache_aware=False)
    assert r.nodes[-1].compute_dtype == "fp32" and [x.rule for x in r.precision.repriced] == ["fp32->tf32"]


def test_a_chip_without_the_origin_class_uses_the_fastest_class_that_holds_its_values():
    """H100 lists no fp4 matrix peak: fp4 codes run at its fp8 peak (fp8 holds every E2M1 value);
    A100 lists neither fp4 nor fp8: fp16 (its int8/int4 peaks are faster but hold no fraction)."""
    n = 256
    flops = 2 * n ** 3
    for chip, cls in (("h100-sxm", "fp8"), ("a100-sxm-80gb", "fp16")):
        spec = load_spec(chip)
        assert spec.units["matrix"].get("fp4") is None
        r = bound(w4a4(n), chip, cache_aware=False)
        mm = r.nodes[-1]
        assert mm.loads[0].resource == f"matrix/{cls}" and close(mm.matrix_time, flops / spec.peak("matrix", cls))
        (rep,) = r.precision.repriced
        assert rep.rule == f"dequant fp4_e2m1 -> {cls}", chip


def test_a_block_scaled_fp8_gemm_on_an_a100_is_priced_at_fp16_not_refused():
    """Before the rule took the chip's classes into account, the fp8 origin on an A100 was an error."""
    from test_precision import fp8_block_matmul  # tests/backends/roofline/test_precision.py

    a100 = load_spec("a100-sxm-80gb")
    r = bound(fp8_block_matmul(), "a100-sxm-80gb", cache_aware=False)
    mm = r.nodes[-1]
    flops = 2 * 8192 * 4096 * 4096
    assert mm.loads[0].resource == "matrix/fp16" and close(mm.matrix_time, flops / a100.peak("matrix", "fp16"))
    assert [x.rule for x in r.precision.repriced] == ["dequant fp8_e4m3 -> fp16"]


def test_torch_capture_of_a_lookup_dequant_reference_is_recognised(tmp_path: Path):
    """The reference form of the corpus' packed fp4 (``w.view(torch.uint8)``, nibbles, ``lut[codes]``,
    ``repeat_interleave`` of the fp8 block scales), both operands packed: captured, validated, fp4."""
    pytest.importorskip("torch")
    from solar_io.frontends.trace.problems import capture_problem

    M, Nn, K = 8, 16, 64
    ref = ("import torch\n"
           "E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]\n\n"
           "def unpack(p, s):\n"
           "    b = p.view(torch.uint8)\n"
           "    lut = torch.tensor(E2M1, dtype=torch.float32, device=p.device)\n"
           "    lo, hi = lut[(b & 0x0F).long()], lut[(b >> 4).long()]\n"
           "    v = torch.stack([lo, hi], dim=-1).reshape(b.shape[0], -1)\n"
           "    return v * s.to(torch.float32).repeat_interleave(16, dim=1)\n\n"
           "def run(x, x_scale, w, w_scale):\n"
           "    return (unpack(x, x_scale) @ unpack(w, w_scale).T).to(torch.bfloat16)\n")
    definition = {
        "name": "nvfp4_w4a4_lut", "reference": ref,
        "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": Nn}, "K": {"type": "const", "value": K},
                 "K_half": {"type": "expr", "expression": "K // 2"},
                 "K_blocks": {"type": "expr", "expression": "K // 16"}},
        "inputs": {"x": {"shape": ["M", "K_half"], "dtype": "float4_e2m1fn_x2"},
                   "x_scale": {"shape": ["M", "K_blocks"], "dtype": "float8_e4m3fn"},
                   "w": {"shape": ["N", "K_half"], "dtype": "float4_e2m1fn_x2"},
                   "w_scale": {"shape": ["N", "K_blocks"], "dtype": "float8_e4m3fn"}},
        "outputs": {"y": {"shape": ["M", "N"], "dtype": "bfloat16"}}}
    d = tmp_path / "p"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps(definition))
    line = {"uuid": "a", "axes": {"M": M}, "inputs": {k: {"type": "random"} for k in definition["inputs"]}}
    (d / "workload.jsonl").write_text(json.dumps(line) + "\n")
    (res,) = capture_problem(d, None, keep_graphs=True)
    assert res.status == "captured" and res.validation == "passed" and not res.opaque, res.error
    r = bound(res.graph, "b200", cache_aware=False)
    (mm,) = [x for x in r.nodes if x.flops_matrix > 0]
    assert mm.compute_dtype == "fp4" and close(mm.matrix_time, 2 * M * Nn * K / FP4)
    (rep,) = r.precision.repriced
    assert rep.rule == "dequant fp4_e2m1 -> fp4" and rep.folded and rep.scales == ("x_scale", "w_scale")
    # one table per unpack call (torch.tensor(E2M1) is built twice), each read by one operand's codes
    assert [t.split(" ", 1)[1] for t in rep.tables] == ["(16 entries, 4-bit codes of x)",
                                                         "(16 entries, 4-bit codes of w)"]
