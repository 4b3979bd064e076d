"""Complex tensors and FFTs through the torch frontend (issue 17, SOL-ExecBench L1/007): complex values
held as (real, imaginary) pairs, each FFT one ``fft`` node (format 1.7) charged its bytes and the floor of
``solar_io.fourier`` (the zero-frequency sums). Bytes and FLOPs by hand; validated against eager PyTorch,
which runs the graph's fft nodes in the executor (numpy) against torch's own transforms."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import solar_io  # noqa: E402
from solar_io.backends.roofline import bound  # noqa: E402
from solar_io.frontends.torch import capture_file  # noqa: E402
from solar_io.hardware import load_spec  # noqa: E402

B200 = load_spec("b200")


def _capture(tmp: Path, body: str, inputs: str):
    src = tmp / "m.py"
    src.write_text("import torch\n"
                   "class Model(torch.nn.Module):\n"
                   "    def forward(self, *xs):\n" + "".join(f"        {line}\n" for line in body.splitlines()) +
                   f"def get_inputs():\n    return [{inputs}]\n", encoding="utf-8")
    g = capture_file(src, validate=True)
    assert g.validation.status == "passed", g.validation.reason
    return g


def test_rfft_is_one_explicit_node_and_the_bound_reads_and_writes_the_complex_sizes(tmp_path):
    """Hyena's FFT convolution step: rfft with zero padding to 2L, scaled, times a real filter."""
    B, C, L = 2, 3, 8
    F = L + 1  # rfft of 2L real values: L + 1 frequencies
    g = _capture(tmp_path, "x, h = xs\n"
                           f"y = torch.fft.rfft(x, n={2 * L}) / {2 * L} * h\n"
                           "return y.real.contiguous(), y.imag.contiguous()",
                 f"torch.randn({B}, {C}, {L}), torch.randn({F})")
    assert not [n for n in g.nodes if n.kind == "opaque"]
    (fft,) = [n for n in g.nodes if n.kind == "fft"]
    assert fft.op == "aten._fft_r2c" and (fft.fft.type, fft.fft.dims, fft.fft.inverse) == ("r2c", (2,), False)
    spectrum = g.shape(fft.outputs[0].tensor)
    dtype = {t.name: t.dtype for t in g.tensors}[fft.outputs[0].tensor]
    assert spectrum == (B, C, F, 2) and dtype == "fp32"  # complex64: two fp32 parts, 8 bytes an element
    m = solar_io.graph_metrics(g)
    # x and h in, the real and imaginary outputs out; the spectrum never crosses the fused boundary
    assert m.boundary_bytes == 4 * B * C * L + 4 * F + 2 * 4 * B * C * F
    assert m.macs == 0
    # the scale and the filter: one division and one multiply per part of each complex element; the
    # transform's floor: 2L - 1 additions for each of the B x C zero-frequency sums
    assert m.flops_vector == 2 * (2 * B * C * F) + B * C * (2 * L - 1)
    r = bound(g, "b200", cache_aware=False)
    assert not r.opaque and r.compute_complete
    assert r.fused.time == max(m.boundary_bytes / B200.dram_bandwidth, m.flops_vector / B200.peak("vector", "fp32"))


def test_fft_of_a_complex_input_reads_and_writes_two_parts_an_element(tmp_path):
    B, N = 4, 16
    g = _capture(tmp_path, "return torch.fft.fft(xs[0])",
                 f"torch.randn({B}, {N}, dtype=torch.complex64)")
    (x,) = [t for t in g.tensors if t.role == "input"]
    assert g.shape(x.name) == (B, N, 2) and x.dtype == "fp32"
    assert [(n.op, n.fft.type) for n in g.nodes if n.kind != "data_movement"] == [("aten._fft_c2c", "c2c")]
    m = solar_io.graph_metrics(g)
    assert m.boundary_bytes == 8 * B * N + 8 * B * N and m.flops_vector == B * (2 * N - 2)


def test_a_product_of_two_spectra_is_six_real_operations_an_element(tmp_path):
    """FFT convolution (Hyena's fftconv): rfft(a) * rfft(b), then irfft. The product is lowered in real
    arithmetic (never part by part); the three transforms are fft nodes, nothing is opaque."""
    B, L = 2, 8
    F = L + 1  # rfft of a length-2L padded signal
    g = _capture(tmp_path, "a, b = xs\n"
                           f"y = torch.fft.rfft(a, n={2 * L}) * torch.fft.rfft(b, n={2 * L})\n"
                           f"return torch.fft.irfft(y, n={2 * L})[..., :{L}]",
                 f"torch.randn({B}, {L}), torch.randn({B}, {L})")
    ops = sorted(n.op for n in g.nodes if n.kind == "fft")
    assert ops == ["aten._fft_c2r", "aten._fft_r2c", "aten._fft_r2c"] and not [n for n in g.nodes if n.kind == "opaque"]
    m = solar_io.graph_metrics(g)
    # the product; two r2c floors of 2L - 1 a row; the c2r floor, F - 1 = L a row (F stored values)
    assert m.flops_vector == 6 * B * F + 2 * B * (2 * L - 1) + B * L and m.macs == 0
    assert m.boundary_bytes == 2 * 4 * B * L + 4 * B * L


def test_a_complex_quotient_without_a_rule_is_opaque_not_a_quotient_of_parts(tmp_path):
    """Dividing the pairs part by part would be wrong; the op is opaque (listed) and validates."""
    g = _capture(tmp_path, "a, b = xs\nreturn torch.view_as_real(torch.fft.rfft(a) / torch.fft.rfft(b))",
                 "torch.randn(2, 8), torch.randn(2, 8)")
    assert [n.op for n in g.nodes if n.kind == "opaque"] == ["aten.div"]
    assert [n.op for n in g.nodes if n.kind == "fft"] == ["aten._fft_r2c"] * 2
    (div,) = [n for n in g.nodes if n.op == "aten.div"]
    assert "complex tensor over a complex tensor" in div.reason


def test_views_of_a_complex_tensor_keep_the_pairs_last(tmp_path):
    """unsqueeze, transpose, slice, select, reshape and expand of a spectrum act on its complex dims
    (L2/052's filter spectrum is unsqueezed before the product): validated, no opaque op."""
    B, C, L = 2, 3, 8
    F = L // 2 + 1  # z: [2, 3, 5] complex
    # [2, 1, 3, 5] -> [3, 1, 2, 5] -> [2, 1, 2, 5] -> [2, 2, 5] -> [4, 5] -> [2, 4, 5]
    g = _capture(tmp_path, "z = torch.fft.rfft(xs[0])\n"
                           "v = z.unsqueeze(1).transpose(0, 2)[1:3].select(1, 0).reshape(4, -1)\n"
                           "return torch.view_as_real(v.unsqueeze(0).expand(2, 4, -1) * 2.0)",
                 f"torch.randn({B}, {C}, {L})")
    assert [n.op for n in g.nodes if n.kind in ("opaque", "fft")] == ["aten._fft_r2c"]
    m = solar_io.graph_metrics(g)
    out = 2 * 4 * F * 2  # the result's parts, fp32
    assert m.boundary_bytes == 4 * B * C * L + 4 * out
    assert m.flops_vector == out + B * C * (L - 1)  # the scale: one multiply per part; the rfft's floor


@pytest.mark.parametrize("call, inputs", [
    ("torch.view_as_real(torch.fft.fft(xs[0], norm='ortho'))", "torch.randn(3, 8, dtype=torch.complex64)"),
    ("torch.view_as_real(torch.fft.ifft(xs[0], dim=0, norm='forward'))", "torch.randn(4, 6, dtype=torch.complex64)"),
    ("torch.view_as_real(torch.fft.fftn(xs[0], dim=(0, 2)))", "torch.randn(4, 3, 6, dtype=torch.complex64)"),
    ("torch.view_as_real(torch.fft.rfft2(xs[0], norm='ortho'))", "torch.randn(2, 6, 10)"),
    ("torch.fft.irfft(xs[0], n=9)", "torch.randn(3, 5, dtype=torch.complex64)"),
    ("torch.fft.irfft(xs[0], n=14)", "torch.randn(3, 5, dtype=torch.complex64)"),  # the spectrum zero-padded
    ("torch.fft.irfft(xs[0], n=4)", "torch.randn(3, 5, dtype=torch.complex64)"),  # and cut
    ("torch.fft.irfftn(xs[0], s=(4, 6), norm='forward')", "torch.randn(2, 4, 4, dtype=torch.complex64)"),
    ("torch.view_as_real(torch.fft.fft(xs[0].double()))", "torch.randn(2, 8)"),
])
def test_every_direction_norm_and_dims_validate_against_torch(tmp_path, call, inputs):
    """Each transform's direction, scaling, dims and c2r length, run by the executor, against eager torch."""
    g = _capture(tmp_path, f"return {call}", inputs)
    assert [n.kind for n in g.nodes if n.kind in ("fft", "opaque")] and \
        not [n for n in g.nodes if n.kind == "opaque"]


def test_c2r_reads_the_first_half_of_a_longer_spectrum(tmp_path):
    """ATen's _fft_c2r reads the first n // 2 + 1 values of its input's last transformed dim: a longer input
    is sliced first (a view), so the fft node reads 5 of the 8 stored values a row; validated."""
    g = _capture(tmp_path, "return torch.ops.aten._fft_c2r(xs[0], [1], 2, 8)",
                 "torch.randn(3, 8, dtype=torch.complex64)")
    (fft,) = [n for n in g.nodes if n.kind == "fft"]
    assert g.shape(fft.inputs[0].tensor) == (3, 5, 2) and g.shape(fft.outputs[0].tensor) == (3, 8)
    assert solar_io.graph_metrics(g).boundary_bytes == 3 * 5 * 8 + 3 * 8 * 4


def test_per_node_checks_run_every_transform_at_reduced_sizes(tmp_path):
    """Past the budget, each fft call (complex inputs made random) is checked on its own at reduced sizes:
    none is left unchecked."""
    src = tmp_path / "m.py"
    src.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x, h):\n"
                   "        L = x.shape[-1]\n"
                   "        y = torch.fft.irfft(torch.fft.rfft(x, n=2 * L) * torch.fft.rfft(h, n=2 * L), n=2 * L)\n"
                   "        return y[..., :L] + x\n"
                   "def get_inputs():\n    return [torch.randn(4, 8, 256), torch.randn(8, 256)]\n", encoding="utf-8")
    g = capture_file(src, validate=True, validate_budget=1000)
    assert g.validation.status == "passed" and g.validation.method == "reference-executor per node"
    assert not g.validation.unchecked and "unchecked" not in (g.validation.reason or "")
    assert sorted(n.fft.type for n in g.nodes if n.kind == "fft") == ["c2r", "r2c", "r2c"]


def test_a_power_spectrogram_is_captured_without_an_opaque_node(tmp_path):
    """``torch.stft`` (reflect padding, framing, a Hann window, one r2c over the frames) then ``|S|^2``: the
    magnitude of a complex tensor is a square-and-sum over the (re, im) rank and a root, by hand 3 vector
    operations and one sqrt per complex element; validated against eager torch."""
    from solar_io.ops import MAP_OPS

    B, L, n_fft, hop = 2, 1600, 64, 16
    g = _capture(tmp_path, f"s = torch.stft(xs[0], n_fft={n_fft}, hop_length={hop}, window=torch.hann_window({n_fft}),"
                           " return_complex=True)\nreturn s.abs() ** 2",
                 f"torch.randn({B}, {L})")
    assert not [n for n in g.nodes if n.kind == "opaque"]
    (fft,) = [n for n in g.nodes if n.kind == "fft"]
    frames, bins = 1 + L // hop, n_fft // 2 + 1
    assert fft.fft.type == "r2c" and g.shape(fft.outputs[0].tensor) == (B, frames, bins, 2)
    m = {x.name: x for x in solar_io.graph_metrics(g).nodes}
    magnitude = [n.name for n in g.nodes if n.op == "aten.abs"]
    sqrt = MAP_OPS["sqrt"]
    assert sum(m[n].flops_vector for n in magnitude) == B * frames * bins * (3 + sqrt.vector)
    assert sum(m[n].transcendental for n in magnitude) == B * frames * bins * sqrt.transcendental


def test_the_phase_of_a_spectrum_is_atan2_of_its_parts(tmp_path):
    g = _capture(tmp_path, "return torch.angle(torch.fft.rfft(xs[0]))", "torch.randn(3, 16)")
    assert [n.op for n in g.nodes if n.kind == "einsum"] == ["aten.angle"]
    assert [n.map for n in g.nodes if n.kind == "einsum"] == ["atan2"]
    assert not [n for n in g.nodes if n.kind == "opaque"]
