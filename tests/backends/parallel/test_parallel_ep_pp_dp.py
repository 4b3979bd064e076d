"""Expert, pipeline and data parallelism: hand-derived collectives, bubble and overlap (issue 22, item 3).

H100 SXM NVLink: 450 GB/s per GPU each way (the spec's 900 GB/s is both directions together).
"""

from __future__ import annotations

import math

import pytest
from parallel_graphs import moe, moe_dense, moe_loop, stack, train_linear, train_two

import solar_io
from solar_io import graph_metrics
from solar_io.backends.parallel import ParallelError, parallel_bound, parse_layout
from solar_io.backends.parallel.shard import subgraph

NVLINK = 4.5e11


def test_ep4_of_four_experts_two_all_to_alls():
    g = moe()  # T=16 tokens, D=32, X=4 experts, C=8 slots each, F=64
    r = parallel_bound(g, "h100-sxm", parse_layout("ep=4"))
    (st,) = r.stages
    a2a = [c for c in st.collectives if c.collective.kind == "all-to-all"]
    assert [c.collective.tensor for c in a2a] == ["buf", "y"]  # dispatch, combine
    assert len(st.collectives) == 2  # nothing else: inference, no gradients
    nbytes = 4 * 8 * 32 * 2  # [X, C, D] bf16: the tokens one chip sends to the experts and gets back
    for c in a2a:
        assert c.collective.nbytes == nbytes and c.group == 4
        assert c.seconds == pytest.approx((4 - 1) / 4 * nbytes / NVLINK, rel=1e-12)
    assert r.plan.ep_rank == "X" and r.plan.ep_tokens == "C" and r.plan.ep_nodes == frozenset({"e1", "act", "e2"})
    # each chip: 1 expert on the 4 x 8 slots of the 4 data-parallel ranks -> the same MACs, a quarter of the weights
    part = [sg for sg in _parts(r) if "expert" in sg.name]
    (experts,) = part
    assert experts.rank_sizes["X"] == 1 and experts.rank_sizes["C"] == 32
    assert graph_metrics(experts).macs == 2 * 4 * 8 * 64 * 32
    assert st.weight_bytes == 2 * (32 * 64 * 2)  # w1 and w2 of one expert
    assert r.layout.dp == 4 and any("dp: not given" in a for a in r.assumptions)


def test_ep4_of_dense_experts_gathers_the_tokens_and_returns_them_all_to_all():
    r = parallel_bound(moe_dense(), "h100-sxm", parse_layout("ep=4"))  # T=16, D=32, X=4, F=64
    (st,) = r.stages
    got = [(c.collective.kind, c.collective.tensor, c.collective.nbytes) for c in st.collectives]
    # each chip needs the 4 replicas' tokens for its expert (all-gather of 4 x [T, D]); the outputs of every
    # expert for this replica's tokens come back (all-to-all of [T, X, D])
    assert got == [("all-gather", "x", 4 * 16 * 32 * 2), ("all-to-all", "y", 16 * 4 * 32 * 2)]
    for c in st.collectives:
        assert c.seconds == pytest.approx(3 / 4 * c.collective.nbytes / NVLINK, rel=1e-12)
    assert r.plan.ep_nodes == frozenset({"e1", "act", "e2"}) and st.weight_bytes == 2 * 32 * 64 * 2


def _parts(r):
    from solar_io.backends.parallel.plan import stage_graph

    return [stage_graph(r.plan, 0, f"moe.{label}", nodes, f) for label, nodes, f in r.plan.segments(0)]


def test_pp2_bubble_and_stage_times():
    g = stack(4, b=64)  # four identical residual blocks
    for m in (1, 2, 4):
        r = parallel_bound(g, "h100-sxm", parse_layout("pp=2"), microbatches=m, residency=False)
        s0, s1 = r.stages
        assert s0.nodes == s1.nodes == 8  # cut at the residual stream between block 1 and block 2
        (send,) = s0.collectives
        nbytes = 64 // m * 512 * 2  # x2[B/m, D] bf16
        assert (send.collective.kind, send.collective.tensor, send.collective.nbytes) == ("send/recv", "x2", nbytes)
        assert send.seconds == pytest.approx(nbytes / NVLINK, rel=1e-12)
        # stage 1 alone is a two-block stack at batch 64/m: its unfused bound, independently
        ref = solar_io.bound(stack(2, b=64 // m), "h100-sxm", residency=False)
        assert s1.work["unfused"].time == pytest.approx(ref.unfused.time, rel=1e-12)
        t = [max(s.work["unfused"].time, s.comm) for s in r.stages]
        assert r.overlapped["unfused"] == pytest.approx(sum(t) + (m - 1) * max(t), rel=1e-12)
        assert r.bubble == (2 - 1) / m
    with pytest.raises(ParallelError, match="layer boundaries"):
        parallel_bound(stack(2), "h100-sxm", parse_layout("pp=4"))
    with pytest.raises(ParallelError, match="not divisible"):
        parallel_bound(stack(2, b=6), "h100-sxm", parse_layout("pp=2"), microbatches=4)


def test_dp4_gradient_allreduce_overlaps_the_backward_only():
    g = train_linear()  # B=8, D=H=4096: dW is 32 MiB, its all-reduce outlasts the small backward
    r = parallel_bound(g, "h100-sxm", parse_layout("dp=4"), residency=False)
    (st,) = r.stages
    (c,) = st.collectives
    nbytes = 4096 * 4096 * 2
    assert (c.collective.kind, c.collective.dim, c.collective.nbytes) == ("all-reduce", "dp", nbytes)
    c_dp = 2 * 3 / 4 * nbytes / NVLINK
    assert c.seconds == pytest.approx(c_dp, rel=1e-12)
    # phase times from hand-cut graphs of the forward, the backward and the optimizer
    parts = {p: solar_io.bound(subgraph(g, names, p), "h100-sxm", residency=False).unfused.time
             for p, names in (("fwd", ["fwd"]), ("bwd", ["grad_w"]), ("opt", ["scale", "update"]))}
    whole = solar_io.bound(g, "h100-sxm", residency=False).unfused.time
    assert whole == pytest.approx(math.fsum(parts.values()), rel=1e-12)
    assert c_dp > parts["bwd"]  # so the all-reduce is exposed past the backward
    assert r.overlapped["unfused"] == pytest.approx(parts["fwd"] + c_dp + parts["opt"], rel=1e-12)
    assert r.serial["unfused"] == pytest.approx(whole + c_dp, rel=1e-12)
    assert r.plan.gradients == ("dw",)  # with microbatches > 1: test_parallel_accumulation.py


def test_inference_dp_adds_no_communication():
    r = parallel_bound(stack(2), "h100-sxm", parse_layout("dp=8"))
    assert not r.stages[0].collectives
    assert r.overlapped == r.serial


def test_pp2_of_a_training_step_keeps_each_layer_with_its_backward_and_update():
    g = train_two()  # B=64, all widths 1024, bf16
    r = parallel_bound(g, "h100-sxm", parse_layout("pp=2"), residency=False)
    assert r.plan.stages == (("fwd1", "dw1_", "s1_", "u1"), ("fwd2", "dw2_", "dy1_", "s2_", "u2"))
    s0, s1 = r.stages
    act = 64 * 1024 * 2  # y1 forward to stage 1, dy1 back to stage 0: [B, E] bf16 each
    assert [(c.collective.kind, c.collective.tensor, c.collective.nbytes) for c in s0.collectives] == [
        ("send/recv", "y1", act)]
    assert [(c.collective.kind, c.collective.tensor, c.collective.nbytes) for c in s1.collectives] == [
        ("send/recv", "dy1", act)]
    ref = solar_io.bound(subgraph(g, ["fwd2", "dw2_", "dy1_", "s2_", "u2"], "s1"), "h100-sxm", residency=False)
    assert s1.work["unfused"].time == pytest.approx(ref.unfused.time, rel=1e-12)
    t = [max(s.work["unfused"].time, s.comm) for s in r.stages]
    assert r.overlapped["unfused"] == pytest.approx(sum(t), rel=1e-12)  # one microbatch: bubble 1
    d = parallel_bound(g, "h100-sxm", parse_layout("pp=2,dp=2"), residency=False)
    grads = [[c.collective.tensor for c in s.collectives if c.collective.dim == "dp"] for s in d.stages]
    assert grads == [["1 gradients"], ["1 gradients"]]
    assert all(c.collective.nbytes == 1024 * 1024 * 2 for s in d.stages for c in s.collectives
               if c.collective.dim == "dp")


def test_ep2_of_experts_as_separate_modules():
    g = moe_loop((3, 5, 2, 6))  # four experts, 3, 5, 2 and 6 routed tokens, D=32, F=64
    r = parallel_bound(g, "h100-sxm", parse_layout("ep=2"))
    (st,) = r.stages
    # chip 1 holds experts 1 and 3 (11 tokens, against 5 on chip 0): the busiest chip is the one bounded
    assert r.plan.ep_nodes == frozenset({f"{k}{i}" for i in (1, 3) for k in ("up", "relu", "down")})
    assert r.plan.ep_dropped == frozenset({f"{k}{i}" for i in (0, 2) for k in ("up", "relu", "down")})
    parts = {sg.name.rsplit(".", 1)[-1]: sg for sg in _parts(r)}
    experts = parts["expert-parallel"]
    assert (experts.rank_sizes["N1"], experts.rank_sizes["N3"]) == (10, 12)  # the tokens of 2 replicas each
    assert graph_metrics(experts).macs == 2 * (2 * 5 * 32 * 64 + 2 * 6 * 32 * 64)
    assert st.weight_bytes == 2 * 2 * 32 * 64 * 2  # w1 and w2 of two experts
    routed = (3 + 5 + 2 + 6) * 32 * 2  # every gathered row, bf16
    got = [(c.collective.kind, c.collective.nbytes) for c in st.collectives]
    assert got == [("all-to-all", routed), ("all-to-all", routed)]  # dispatch, combine
    assert all(c.seconds == pytest.approx(1 / 2 * routed / NVLINK, rel=1e-12) for c in st.collectives)
