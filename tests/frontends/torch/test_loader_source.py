"""Model files are compiled from their source on every load (frontends/common/source_file.py): a file
rewritten within one second to the same size is read anew, and no ``__pycache__`` is left beside it."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from solar_io.frontends.torch.loader import load_source  # noqa: E402

MODEL = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * {k}.0


def get_inputs():
    return [torch.ones(3)]
"""


def test_a_rewritten_model_file_is_read_again_and_leaves_no_bytecode(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as where PYTHONDONTWRITEBYTECODE is unset
    path = tmp_path / "m.py"
    got = []
    for k in (2, 3):  # same size, same second: Python's bytecode cache would call it unchanged
        path.write_text(MODEL.format(k=k))
        src = load_source(path)
        got.append(src.model("cpu")(*src.inputs("cpu")).tolist())
    assert got == [[2.0] * 3, [3.0] * 3]
    assert not (tmp_path / "__pycache__").exists()
