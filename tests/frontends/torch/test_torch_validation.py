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


ATTENTION = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention over unscaled random projections, its precision pinned as reference code pins it
    (an fp32 RMSNorm, softmax(dtype=float32)): logits of ~{scale}^2 * 10 make some rows' softmax a
    near tie that the logits' last bits decide."""

    def __init__(self, d=16):
        super().__init__()
        self.wq = nn.Parameter({scale} * torch.randn(d, d, dtype=torch.{dtype}))
        self.wk = nn.Parameter(torch.randn(d, d, dtype=torch.{dtype}))
        self.wv = nn.Parameter(torch.randn(d, d, dtype=torch.{dtype}))

    def forward(self, x):
        h = x.to(torch.float32)
        x = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)
        q, k, v = x @ self.wq, x @ self.wk, x @ self.wv
        p = torch.softmax(q @ k.transpose(-1, -2), -1, dtype=torch.float32)
        return p.to(x.dtype) @ v


def get_inputs():
    return [torch.randn({rows}, 4, 16, dtype=torch.{dtype})]
'''


def _attention(tmp_path: Path, dtype: str, scale: int, rows: int):
    path = tmp_path / f"attention_{dtype}.py"
    path.write_text(ATTENTION.format(dtype=dtype, scale=scale, rows=rows))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_source(load_source(path), validate=True)


@pytest.mark.parametrize("dtype,scale,rows,first", [
    # float32: 65,536 softmax rows, logits ~10^7; the rerun used to keep softmax(dtype=float32) and the
    # .to(float32) in float32 while the graph ran in float64 (max abs error 0.0361 either way)
    ("float32", 1000, 16384, "float32 outputs differ"),
    # bfloat16: logits of ~60 rounded to 8 bits; there was no rerun for a graph with bf16 tensors
    ("bfloat16", 1, 256, "bfloat16/float32 outputs differ"),
])
def test_precision_the_code_pins_is_widened_in_the_float64_rerun(tmp_path: Path, dtype: str, scale: int,
                                                                  rows: int, first: str) -> None:
    cap = _attention(tmp_path, dtype, scale, rows)
    v = cap.graph.validation
    assert v.status == "passed", v.reason
    assert first in v.reason and "float64 rerun" in v.reason and "within float32's tolerances" in v.reason
    assert v.rtol == 1e-3  # float32's, for the bf16 outputs too


def test_a_wrong_bf16_graph_still_fails_in_float64(tmp_path: Path) -> None:
    cap = _attention(tmp_path, "bfloat16", 1, 256)
    g = cap.graph
    nodes = tuple(dataclasses.replace(n, map="add") if n.kind == "einsum" and n.map == "mul" and n.reduce == "add"
                  else n for n in g.nodes)
    assert nodes != g.nodes  # the projections now add their operands
    v = validate_capture(dataclasses.replace(cap, graph=dataclasses.replace(g, nodes=nodes)))
    assert v.status == "failed" and "float64" not in (v.reason or "")
    # the node-by-node rerun of the traced program (its .to checks name the meta device) finds the op
    assert "first diverging node: matmul" in v.reason, v.reason


def test_the_float64_mode_widens_pinned_dtypes_and_factories() -> None:
    from solar_io.frontends.torch.widen import Float64Mode

    x = torch.ones(3, dtype=torch.float64)
    with Float64Mode():
        got = [x.to(torch.float32), x.to(torch.bfloat16), torch.softmax(x, 0, dtype=torch.float16), torch.zeros(2),
               torch.full((2,), 1.5, dtype=torch.float32), x.to(torch.int32)]
    assert [t.dtype for t in got] == [torch.float64] * 5 + [torch.int32]
    assert torch.get_default_dtype() == torch.float32


def test_a_float64_rerun_that_cannot_run_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rerun out of memory (it holds model and graph in float64) was a bare failure: the record now
    says the rerun did not run, and why."""
    from solar_io.frontends.torch import check

    def no_memory(g):
        raise MemoryError("Unable to allocate 4.2 GiB")

    monkeypatch.setattr(check, "widened_graph", no_memory)
    v = _capture(tmp_path).graph.validation
    assert v.status == "failed"
    assert "the float64 rerun raised MemoryError: Unable to allocate 4.2 GiB" in v.reason, v.reason
