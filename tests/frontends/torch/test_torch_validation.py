"""Whole-graph validation of ill-conditioned models: a float32 failure is retried in float64."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from solar_io.frontends.torch.capture import capture_source  # noqa: E402
from solar_io.frontends.torch.check import validate_capture  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402

ILL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A train-mode batch norm over two nearly equal rows divides their tiny difference by its own
    size: float32 rounding in the matmul before it becomes an O(1) output difference."""

    def __init__(self, k=4096, n=64):
        super().__init__()
        self.fc = nn.Linear(k, n)
        self.bn = nn.BatchNorm1d(n, eps=1e-12)

    def forward(self, x):
        return self.bn(self.fc(x))


def get_inputs():
    x = torch.randn(1, 4096)
    return [torch.cat([x, x + 1e-6 * torch.randn(1, 4096)])]


def get_init_inputs():
    return []
'''


def _capture(tmp_path: Path):
    path = tmp_path / "ill_conditioned.py"
    path.write_text(ILL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_source(load_source(path), validate=True)


def test_float32_rounding_the_model_amplifies_passes_in_float64(tmp_path: Path) -> None:
    cap = _capture(tmp_path)
    v = cap.graph.validation
    assert v.status == "passed", v.reason
    # the float32 comparison failed by far more than its tolerance; the float64 one agrees
    assert "float32 outputs differ" in v.reason and "float64 rerun" in v.reason
    assert v.max_abs_error < 1e-4


def test_a_wrong_graph_still_fails_in_float64(tmp_path: Path) -> None:
    cap = _capture(tmp_path)
    g = cap.graph
    nodes = tuple(dataclasses.replace(n, map="sub") if n.kind == "einsum" and n.map == "add" and n.reduce == "none"
                  else n for n in g.nodes)
    assert nodes != g.nodes  # the bias add (and the variance's + eps) now subtract
    wrong = dataclasses.replace(cap, graph=dataclasses.replace(g, nodes=nodes))
    v = validate_capture(wrong)
    assert v.status == "failed" and "float64" not in (v.reason or "")
