"""Pipeline parallelism of a training step with microbatches > 1 (issue 22): forward and backward per
microbatch, gradients accumulated, the optimizer once per step, the bubble; hand-checked on a two-stage MLP.

H100 SXM NVLink: 450 GB/s per GPU each way."""

from __future__ import annotations

import math

import pytest
from parallel_graphs import train_linear, train_two

import solar_io
from solar_io.backends.parallel import parallel_bound, parse_layout
from solar_io.backends.parallel.shard import subgraph
from solar_io.hardware import load_spec

NVLINK = 4.5e11
HW = "h100-sxm"


def _unfused(g, names: list[str]) -> float:  # noqa: ANN001
    return solar_io.bound(subgraph(g, names, "part"), HW, residency=False).unfused.time


def test_pp2_training_step_with_four_microbatches_by_hand():
    m, b, d = 4, 64, 1024
    g = train_two(b=b, d=d)  # y1 = x w1, y2 = y1 w2 and their backward, SGD; bf16
    r = parallel_bound(g, HW, parse_layout("pp=2"), microbatches=m, residency=False)
    assert r.plan.stages == (("fwd1", "dw1_", "s1_", "u1"), ("fwd2", "dw2_", "dy1_", "s2_", "u2"))
    s0, s1 = r.stages
    # per microbatch: the forward and backward of batch b/m, bounded independently on the hand-cut graphs
    mb = train_two(b=b // m, d=d)
    t0, t1 = _unfused(mb, ["fwd1", "dw1_"]), _unfused(mb, ["fwd2", "dw2_", "dy1_"])
    assert s0.work["unfused"].time == pytest.approx(t0, rel=1e-12)
    assert s1.work["unfused"].time == pytest.approx(t1, rel=1e-12)
    # the optimizer once per step, at full size (a weight has no batch rank)
    o0, o1 = _unfused(g, ["s1_", "u1"]), _unfused(g, ["s2_", "u2"])
    assert s0.step_work["unfused"].time == pytest.approx(o0, rel=1e-12)
    assert s1.step_work["unfused"].time == pytest.approx(o1, rel=1e-12)
    # accumulation: microbatches 2..m read the d x d bf16 gradient sum once more (no residency here)
    grad = d * d * 2
    acc = (m - 1) * grad / load_spec(HW).dram_bandwidth
    assert s0.accumulation == pytest.approx({"unfused": acc, "fused": 0.0, "cache-aware": acc})
    assert s1.accumulation == pytest.approx({"unfused": acc, "fused": 0.0, "cache-aware": acc})
    # activations forward, gradients back: [b/m, d] bf16 per microbatch
    act = b // m * d * 2
    assert [(c.collective.tensor, c.collective.nbytes) for c in s0.collectives] == [("y1", act)]
    assert [(c.collective.tensor, c.collective.nbytes) for c in s1.collectives] == [("dy1", act)]
    c = act / NVLINK
    a0, a1 = max(t0, c), max(t1, c)
    # step: each stage's m microbatches and accumulation, after the earlier stages' first pass and before its
    # optimizer: max(m a0 + A + O0, a0 + m a1 + A, m a1 + A + O1)
    want = max(m * a0 + acc + o0, a0 + m * a1 + acc, m * a1 + acc + o1)
    assert r.overlapped["unfused"] == pytest.approx(want, rel=1e-12)
    s_0, s_1 = t0 + c, t1 + c
    assert r.serial["unfused"] == pytest.approx(max(m * s_0 + acc + o0, s_0 + m * s_1 + acc, m * s_1 + acc + o1),
                                                rel=1e-12)
    assert any("gradient accumulation" in a and "bubble (p-1)/(m+p-1) = 0.2" in a for a in r.assumptions)
    assert any(a.startswith("latency: link latency assumed 0") for a in r.assumptions)  # no spec publishes one
    text = solar_io.backends.parallel.render(r)
    assert "optimizer once per step" in text


def test_equal_stages_give_the_one_f_one_b_bubble():
    # (m + p - 1) t for equal stages: stage times replaced by one value t give exactly that
    from solar_io.backends.parallel.accumulate import accumulating_makespan
    from solar_io.backends.parallel.sol import ChipTime, StageResult

    st = [StageResult(i, 1, ("replicated",), {"unfused": ChipTime(1.0, 1.0, 1.0)}, (), 0.0) for i in range(4)]
    for m in (1, 4, 8):
        assert accumulating_makespan(st, [1.0] * 4, "unfused", m) == m + 4 - 1  # bubble (p-1)/(m+p-1)


def test_dp_with_microbatches_all_reduces_once_per_step_after_the_last_backward():
    m = 2
    g = train_linear()  # B=8, D=H=4096: dW 32 MiB
    r = parallel_bound(g, HW, parse_layout("dp=4"), microbatches=m, residency=False)
    (st,) = r.stages
    (c,) = st.collectives
    nbytes = 4096 * 4096 * 2
    assert (c.collective.kind, c.collective.nbytes) == ("all-reduce", nbytes)  # once per step, whole gradient
    c_dp = 2 * 3 / 4 * nbytes / NVLINK
    mb = train_linear(b=8 // m)
    fwd, bwd = _unfused(mb, ["fwd"]), _unfused(mb, ["grad_w"])
    opt = _unfused(g, ["scale", "update"])
    acc = (m - 1) * nbytes / load_spec(HW).dram_bandwidth
    assert st.work["unfused"].time == pytest.approx(fwd + bwd, rel=1e-12)
    # only the last microbatch's backward can hide the all-reduce: the gradient is final only then
    step = m * (fwd + bwd) + acc + opt
    assert r.overlapped["unfused"] == pytest.approx(max(step, step - bwd + c_dp), rel=1e-12)
    assert r.serial["unfused"] == pytest.approx(step + c_dp, rel=1e-12)
    assert math.isclose(r.collective_seconds("all-reduce"), c_dp, rel_tol=1e-12)
