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
