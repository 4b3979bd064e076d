"""The executor's short path for plain elementwise maps and slices (``executor_simple``) computes
exactly what the general path computes: every golden graph (each version, every node kind) and a
captured-style recurrence run both ways give bit-identical outputs."""

from __future__ import annotations

import numpy as np
import pytest
from paths import ROOT

import solar_io
from solar_io import executor
from solar_io.dtypes import numpy_dtype

GOLDEN = sorted((ROOT / "tests" / "golden").rglob("*.yaml"))


def _inputs(g: solar_io.Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    produced = {a.tensor for n in g.nodes for a in n.outputs}
    out = {}
    for t in g.tensors:
        if t.name in produced or t.value is not None:
            continue
        dt = np.dtype(numpy_dtype(t.dtype))
        shape = g.shape(t.name)
        if dt.kind in "iu":
            out[t.name] = rng.integers(0, 2, size=shape).astype(dt)  # small: valid indexes of any dim
        elif dt.kind == "b":
            out[t.name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            out[t.name] = rng.standard_normal(shape).astype(dt)
    return out


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_short_path_equals_general_path(path, monkeypatch: pytest.MonkeyPatch):
    g = solar_io.load(path)
    if any(n.kind == "opaque" for n in g.nodes):
        pytest.skip("opaque nodes need an implementation")
    arrays = _inputs(g, np.random.default_rng(0))
    try:
        with np.errstate(all="ignore"):
            fast = solar_io.execute(g, arrays, outputs="all")
    except executor.ExecutionError as e:  # inputs a graph's semantics refuse (an index out of range)
        pytest.skip(f"random inputs not valid here: {e}")
    monkeypatch.setattr(executor, "simple_einsum", lambda *a: None)
    with np.errstate(all="ignore"):
        slow = solar_io.execute(g, arrays, outputs="all")
    assert fast.keys() == slow.keys()
    for k in fast:
        assert fast[k].dtype == slow[k].dtype and fast[k].shape == slow[k].shape, k
        np.testing.assert_array_equal(fast[k], slow[k], err_msg=k)


def test_the_short_path_is_taken_for_slices_and_maps(monkeypatch: pytest.MonkeyPatch):
    g = solar_io.load(ROOT / "tests" / "golden" / "v1.4" / "rnn_repeat.yaml")
    taken = []
    real = executor.simple_einsum
    monkeypatch.setattr(executor, "simple_einsum", lambda *a: taken.append(real(*a) is not None) or real(*a))
    solar_io.execute(g, _inputs(g, np.random.default_rng(1)))
    # xw and hu.* contract (general path); h.0, pre.*, h.* map and y copies (short path)
    assert taken == [False, True] + [False, True, True] * 3 + [True]
