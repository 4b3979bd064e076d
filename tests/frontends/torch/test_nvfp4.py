"""NVFP4 ``torch._scaled_mm`` (issue 17): two packed fp4 operands with 1x16 e4m3 block scales in
cuBLAS's blocked layout, which PyTorch refuses on the CPU ("Invalid scaling configuration").

- the CPU kernel (``frontends/torch/nvfp4.py``) against a dequantisation by hand, element by element,
  of scales laid out the way the SOL-ExecBench references write them;
- the capture: validated against that kernel, one fp4 GEMM of M*N*K MACs priced at the B200's fp4
  peak, its kernel moving the packed operands, the scales and the output, nothing else.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from solar_io.backends.roofline import bound  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.frontends.torch.nvfp4 import CpuNvfp4  # noqa: E402
from solar_io.metrics import graph_metrics  # noqa: E402

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def blocked(sf: torch.Tensor) -> torch.Tensor:
    """The references' convert_to_blocked_format_for_pytorch_scaled_mm (rows % 128, cols % 4)."""
    rows, cols = sf.shape
    blocks = sf.view(rows // 128, 128, cols // 4, 4).permute(0, 2, 1, 3)
    return blocks.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16).flatten()


def by_hand(packed: torch.Tensor, scale: torch.Tensor) -> np.ndarray:
    """[rows, K] fp64: element k of a row is the low nibble of byte k // 2 when k is even, else the high."""
    rows, half = packed.shape
    out = np.zeros((rows, 2 * half))
    for r in range(rows):
        for k in range(2 * half):
            byte = int(packed[r, k // 2])
            out[r, k] = E2M1[byte & 15 if k % 2 == 0 else byte >> 4] * float(scale[r, k // 16].float())
    return out


def test_cpu_kernel_equals_the_blocked_scales_dequantised_by_hand():
    m, n, k = 256, 128, 64
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, generator=gen)
    w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=gen)
    sa = (torch.rand(m, k // 16, generator=gen) * 4).to(torch.float8_e4m3fn)
    sw = (torch.rand(n, k // 16, generator=gen) * 4).to(torch.float8_e4m3fn)
    fp4 = torch.float4_e2m1fn_x2
    args = (a.view(fp4), w.view(fp4).t(), blocked(sa), blocked(sw))
    with pytest.raises(Exception, match="scaling"):  # what PyTorch does on the CPU without it
        torch._scaled_mm(*args, out_dtype=torch.float32)
    with CpuNvfp4() as mode:
        got = torch._scaled_mm(*args, out_dtype=torch.float32)
        bias = torch._scaled_mm(*args, bias=torch.ones(n), out_dtype=torch.bfloat16)
    want = by_hand(a, sa) @ by_hand(w, sw).T
    assert mode.calls == 2 and got.dtype == torch.float32 and bias.dtype == torch.bfloat16
    assert np.allclose(got.numpy(), want, rtol=1e-5, atol=1e-3)
    assert np.allclose(bias.float().numpy(), want + 1, rtol=1e-2, atol=1e-1)


M, N, K = 128, 256, 64

MODEL = textwrap.dedent(f'''
    import torch
    import torch.nn as nn

    M, N, K = {M}, {N}, {K}


    class Model(nn.Module):
        def forward(self, a, w, sa, sw):
            return torch._scaled_mm(a, w.transpose(0, 1), sa, sw, bias=None, out_dtype=torch.bfloat16)


    def get_inputs():
        fp4 = torch.float4_e2m1fn_x2
        a = torch.randint(0, 256, (M, K // 2), dtype=torch.uint8).view(fp4)
        w = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8).view(fp4)
        sa = (torch.rand(M * K // 16) * 2).to(torch.float8_e4m3fn)  # already in the blocked layout
        sw = (torch.rand(N * K // 16) * 2).to(torch.float8_e4m3fn)
        return [a, w, sa, sw]
''')


def test_nvfp4_scaled_mm_is_captured_as_one_fp4_gemm(tmp_path: Path):
    p = tmp_path / "nvfp4_mm.py"
    p.write_text(MODEL)
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    m = graph_metrics(g)
    assert m.opaque == () and m.macs == M * N * K
    r = bound(g, "b200", cache_aware=False)
    (mm,) = [x for x in r.nodes if x.flops_matrix > 0]
    assert mm.compute_dtype == "fp4" and mm.precision == "dequant fp4_e2m1"
    (rep,) = r.precision.repriced
    assert rep.rule == "dequant fp4_e2m1 -> fp4" and rep.folded and rep.scales == ("sa", "sw")
    # one kernel: packed a and w (half a byte a value), one e4m3 byte per 16 values of each, bf16 out
    (kern,) = [k for k in r.kernels if k.dram_bytes > 0]
    assert kern.dram_bytes == M * K // 2 + N * K // 2 + M * K // 16 + N * K // 16 + 2 * M * N
    assert r.totals.boundary_bytes == kern.dram_bytes


QUANTISED_IN_PROGRAM = MODEL.replace(
    "        return torch._scaled_mm(a, w.transpose(0, 1), sa, sw, bias=None, out_dtype=torch.bfloat16)",
    "        codes = torch.clamp(a.abs() * 2, max=7).to(torch.uint8)  # a: fp32 activations here\n"
    "        a = (codes[..., ::2] + codes[..., 1::2] * 16).view(torch.float4_e2m1fn_x2)\n"
    "        return torch._scaled_mm(a, w.transpose(0, 1), sa, sw, bias=None, out_dtype=torch.bfloat16)",
).replace("a = torch.randint(0, 256, (M, K // 2), dtype=torch.uint8).view(fp4)", "a = torch.randn(M, K)")


def test_activations_quantised_by_the_program_are_fp4_operands_too(tmp_path: Path):
    """The corpus' NVFP4 references quantise x inside ``run`` (codes computed, packed, viewed as fp4):
    those codes come from a computed uint8 tensor, not a graph input; the dequant rule now starts a
    chain at any tensor of at most 8 bits, so the GEMM is fp4 x fp4 (it was priced as fp32 -> tf32)."""
    p = tmp_path / "nvfp4_quant.py"
    assert "codes[..., ::2]" in QUANTISED_IN_PROGRAM and "torch.randn(M, K)" in QUANTISED_IN_PROGRAM
    p.write_text(QUANTISED_IN_PROGRAM)
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    r = bound(g, "b200", cache_aware=False)
    (mm,) = [x for x in r.nodes if x.flops_matrix > 0]
    assert mm.compute_dtype == "fp4" and mm.flops_matrix == 2 * M * N * K
    (rep,) = r.precision.repriced
    assert rep.rule == "dequant fp4_e2m1 -> fp4" and len(rep.tables) == 2
