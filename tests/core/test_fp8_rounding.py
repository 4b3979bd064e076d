"""The executor rounds fp8 tensors to their values exactly as PyTorch converts to them.

Without it, a program that quantises to fp8 (SOL-ExecBench's fp8 references: scale, cast to
``float8_e4m3fn``, matmul) disagrees with eager PyTorch by the quantisation error and fails its
validation although the graph is right.
"""

from __future__ import annotations

import numpy as np
import pytest

from solar_io.dtypes import ROUNDED, round_values

torch = pytest.importorskip("torch")

TORCH_DTYPE = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


def _every_value_and_midpoint(name: str) -> np.ndarray:
    """Every finite value of the format, the midpoints between neighbours (ties), points just off
    them, and values past the largest finite one."""
    codes = torch.arange(256, dtype=torch.int16).to(torch.uint8).view(TORCH_DTYPE[name]).float().numpy()
    vals = np.unique(codes[np.isfinite(codes)])
    mids = (vals[1:] + vals[:-1]) / 2
    top = ROUNDED[name][2]
    extra = np.array([top * 1.01, top * 1.07, top * 1.2, top * 10, 1e30], np.float32)
    return np.concatenate([vals, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), extra, -extra])


@pytest.mark.parametrize("name", sorted(ROUNDED))
def test_round_values_equals_torch_conversion_on_every_tie(name: str) -> None:
    x = _every_value_and_midpoint(name).astype(np.float32)
    want = torch.from_numpy(x).to(TORCH_DTYPE[name]).float().numpy()
    np.testing.assert_array_equal(round_values(name, x), want)


@pytest.mark.parametrize("name", sorted(ROUNDED))
def test_round_values_equals_torch_conversion_on_random_values(name: str) -> None:
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(20000).astype(np.float32) * s for s in (1e-5, 1e-2, 1.0, 300.0, 1e5)])
    want = torch.from_numpy(x).to(TORCH_DTYPE[name]).float().numpy()
    np.testing.assert_array_equal(round_values(name, x), want)


def test_other_dtypes_are_not_rounded() -> None:
    x = np.array([0.1, 1e-7], np.float32)
    assert round_values("fp32", x) is x and round_values("bf16", x) is x


def test_a_program_that_quantises_to_fp8_validates(tmp_path) -> None:
    """(x * 300) cast to fp8 and back: eager rounds, so must the graph (this failed validation)."""
    from solar_io.frontends.torch.capture import capture_file

    src = tmp_path / "quant.py"
    src.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return (x * 300.0).to(torch.float8_e4m3fn).to(torch.float32) * 2.0\n\n\n"
        "def get_inputs():\n    return [torch.randn(64, 32)]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    g = capture_file(src)
    assert g.validation.status == "passed", g.validation.reason
