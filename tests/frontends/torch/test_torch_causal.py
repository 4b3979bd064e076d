"""Causal attention is bounded by the work of the causal triangle, not the full rectangle."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch")


from paths import TESTS

from solar_io import bound, graph_metrics  # noqa: E402
from solar_io.frontends import torch as torch_frontend  # noqa: E402

MODEL = TESTS / "models" / "sdpa_causal.py"


def test_causal_scores_are_declared_as_the_triangle():
    g = torch_frontend.capture_file(MODEL, validate=False)
    n = m = 16  # sdpa_causal.py: q, k of shape (2, 4, 16, 8), is_causal=True (torch: tril(ones(n, m)))
    kept = sum(min(i + 1, m) for i in range(n)) / (n * m)
    dense = [t for t in g.tensors if len(t.ranks) >= 2 and g.shape(t.name)[-2:] == (n, m)]
    assert dense and all(t.density == pytest.approx(kept) for t in dense)
    qk = next(node for node in g.nodes if node.attrs and dict(node.attrs).get("causal"))
    assert dict(qk.attrs)["causal_work"] == "triangle (tensor density)"
    # MACs stay those of the math kernel (FlopCounterMode agrees); the bound scales them.
    macs = 2 * 4 * n * m * 8
    assert graph_metrics(g).nodes[g.nodes.index(qk)].macs == macs
    rectangle = dataclasses.replace(g, tensors=tuple(dataclasses.replace(t, density=None) for t in g.tensors))
    tri, rect = bound(g, "h100-sxm"), bound(rectangle, "h100-sxm")
    i = g.nodes.index(qk)
    assert tri.nodes[i].matrix_time == pytest.approx(kept * rect.nodes[i].matrix_time)
    # the causal mask is generated (0 bytes either way): the triangle lowers the compute, not the bytes
    assert tri.unfused.compute_time < rect.unfused.compute_time and tri.unfused.time <= rect.unfused.time


def test_the_causal_table_is_built_only_when_the_validation_reads_it():
    """The mask is a generated table: a capture without validation never builds its array (a 4096 x 4096
    one per capture of a long-sequence model), and the validation reads torch's tril(ones(n, m)) itself."""
    import numpy as np

    from solar_io.frontends.torch.loader import load_source

    cap = torch_frontend.capture_source(load_source(MODEL), validate=False)
    data = cap.lowered.const_data
    (name,) = [t.name for t in cap.graph.tensors if t.generated and t.dtype == "bool"]
    assert callable(dict.__getitem__(data, name))  # not built
    assert np.array_equal(data[name], np.tril(np.ones((16, 16), bool)))
    assert isinstance(dict.__getitem__(data, name), np.ndarray)  # built once, kept
    assert torch_frontend.capture_file(MODEL).validation.status == "passed"
