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


def _counted_source(factory):
    from pathlib import Path

    from solar_io.frontends.torch.loader import Source, _FnModule

    calls = []

    def made():
        calls.append(torch.get_default_device().type)
        return factory()

    return Source(Path("m.py"), "m.py", "0" * 64, lambda: _FnModule(lambda *a: a), made), calls


def test_inputs_from_one_random_state_are_made_once_and_handed_out_as_copies():
    """Two calls from one seeded state: the generator runs once, the second gets equal tensors that are not
    the first's (a forward may write its inputs), and the random state ends where the generator left it."""
    src, calls = _counted_source(lambda: [torch.randn(4, 3), torch.randint(0, 9, (5,)), 2.5])
    torch.manual_seed(7)
    first = src.inputs("cpu")
    after = torch.random.get_rng_state()
    first[0].zero_()  # a forward writing its input
    torch.manual_seed(7)
    second = src.inputs("cpu")
    assert calls == ["cpu"]
    assert torch.equal(torch.random.get_rng_state(), after)
    torch.manual_seed(7)
    assert torch.equal(second[0], torch.randn(4, 3)) and second[2] == 2.5
    torch.manual_seed(8)
    src.inputs("cpu")
    assert calls == ["cpu", "cpu"]  # another state: made again


def test_a_generator_that_needs_data_on_meta_runs_once_on_the_cpu():
    """``x.sum().item()`` cannot run on meta: the first meta call falls back to the CPU under INPUT_SEED;
    later meta calls get tensors of the same shapes and dtypes without running the generator, and so does a
    CPU call from that seed (validation's inputs), with the values the generator made."""
    from solar_io.frontends.torch.loader import INPUT_SEED

    def needs_data():
        x = torch.randn(3, 4)
        return [x / x.abs().max().item(), torch.zeros(2, dtype=torch.int64)]

    src, calls = _counted_source(needs_data)
    a = src.inputs("meta")
    b = src.inputs("meta")
    assert calls == ["meta", "cpu"]
    assert [(t.shape, t.dtype, t.device.type) for t in a] == [(t.shape, t.dtype, t.device.type) for t in b] \
        == [((3, 4), torch.float32, "meta"), ((2,), torch.int64, "meta")]
    torch.manual_seed(INPUT_SEED)
    x = src.inputs("cpu")[0]
    assert calls == ["meta", "cpu"]
    torch.manual_seed(INPUT_SEED)
    assert torch.equal(x, needs_data()[0])


def test_inputs_sharing_memory_are_made_again():
    """A copy of ``x`` and of its view would be two tensors: such inputs are not kept."""
    def aliased():
        x = torch.randn(4, 3)
        return [x, x[0]]

    src, calls = _counted_source(aliased)
    for _ in range(2):
        torch.manual_seed(3)
        src.inputs("cpu")
    assert calls == ["cpu", "cpu"]
