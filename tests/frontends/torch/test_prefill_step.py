"""Prefill vs decode steps (issue 18 item 4): causal prefill is bounded by the triangle, decode by full rows.

A prefill of n tokens attends query i to positions 0..i (the causal triangle: n(n+1)/2 scores per
head); a decode step after n - 1 cached positions attends its one query to all n positions (one
full row). Model: ``examples/models/llama_kv.py`` at its small defaults (2 layers, 4 heads of 16).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


from paths import ROOT

from solar_io import bound, graph_metrics  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.frontends.torch.phases import Step  # noqa: E402

EXAMPLE = ROOT / "examples" / "models" / "llama_kv.py"
H, HD, N = 4, 16, 8


def _qk(g):  # noqa: ANN001, ANN202
    sdpa = "aten.scaled_dot_product_attention"
    return [i for i, n in enumerate(g.nodes) if n.op == sdpa and n.name.endswith(".scores")]


def test_prefill_triangle_and_decode_full_row():
    pre = capture_file(EXAMPLE, step=Step("prefill", batch=1, seq=N), validate=False)
    dec = capture_file(EXAMPLE, step=Step("decode", batch=1, kv_len=N - 1), validate=False)
    mp, md = graph_metrics(pre), graph_metrics(dec)
    (p0, _), (d0, _) = _qk(pre), _qk(dec)
    # both iterate rectangles (the math kernel, as FlopCounterMode counts): n x n and 1 x n per head
    assert mp.nodes[p0].macs == H * N * N * HD and md.nodes[d0].macs == H * 1 * N * HD
    scores = pre.nodes[p0].outputs[0].tensor
    assert pre.tensor_map[scores].density == pytest.approx((N + 1) / (2 * N))  # the triangle's share
    assert dec.tensor_map[dec.nodes[d0].outputs[0].tensor].density is None    # every cached position is read
    assert dict(pre.nodes[p0].attrs)["causal"] is True and dict(dec.nodes[d0].attrs)["causal"] is False
    # the bound prices the triangle: n(n+1)/2 score rows' work against the decode row's n
    tp, td = bound(pre, "h100-sxm").nodes[p0].matrix_time, bound(dec, "h100-sxm").nodes[d0].matrix_time
    assert tp / td == pytest.approx(N * (N + 1) / 2 / N)


def test_prefill_records_the_step_and_validates():
    g = capture_file(EXAMPLE, step=Step("prefill", batch=2, seq=N))
    assert g.validation.status == "passed"
    step = next(a for a in g.assumptions if a.kind == "step")
    assert step.subject == "prefill" and dict(step.values)["seq"] == N and dict(step.values)["kv_len"] == 0
    assert dict(step.values)["cache_inputs"] == ()  # nothing cached before the prompt
