"""Tensor (and sequence) parallelism: hand-derived collectives and per-chip work (issue 22, item 3).

Link figures are the specs': H100 SXM NVLink 450 GB/s each way (900 GB/s both ways), DGX H100
ConnectX-7 400 Gb/s = 50 GB/s per GPU. Ring all-reduce over n chips: 2(n-1)/n * bytes / bw.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from parallel_graphs import stack as _stack
from paths import ROOT

import solar_io
from solar_io import graph_metrics, load, validate
from solar_io.backends.parallel import ParallelError, make_layout, parallel_bound, parse_layout
from solar_io.backends.parallel.canon import canonical

MLP = ROOT / "examples" / "graphs" / "mlp.yaml"
NVLINK = 4.5e11  # H100 SXM, bytes/s per direction
IB = 5.0e10  # one 400 Gb/s NIC per GPU


def test_tp2_mlp_one_allreduce_of_the_activation_at_ring_cost():
    g = load(MLP)  # B=512, D=1024, H=4096, O=1024, bf16
    r = parallel_bound(g, "h100-sxm", parse_layout("tp=2"))
    (st,) = r.stages
    (c,) = st.collectives
    assert (c.collective.kind, c.collective.dim, c.collective.tensor) == ("all-reduce", "tp", "z")
    nbytes = 512 * 1024 * 2  # z[B, O] in bf16: the row-parallel fc2's partial sums
    assert c.collective.nbytes == nbytes
    assert c.seconds == pytest.approx(2 * (2 - 1) / 2 * nbytes / NVLINK, rel=1e-12)
    assert r.plan.column == ("fc1",) and r.plan.row == ("fc2",) and r.plan.tp_splits == {"H": 2}
    # per chip: half the MACs, and the same bound as the MLP written with H = 2048 by hand
    assert graph_metrics(r.plan.graph).macs == graph_metrics(g).macs // 2
    half = replace(g, ranks=tuple((k, 2048 if k == "H" else v) for k, v in g.ranks))
    ref = solar_io.bound(half, "h100-sxm")
    assert st.work["unfused"].time == pytest.approx(ref.unfused.time, rel=1e-12)
    assert st.work["fused"].time == pytest.approx(ref.fused.time, rel=1e-12)
    for f in ("unfused", "fused"):
        assert r.overlapped[f] == pytest.approx(max(st.work[f].time, c.seconds), rel=1e-12)
        assert r.serial[f] == pytest.approx(st.work[f].time + c.seconds, rel=1e-12)
    assert r.collective_seconds("all-reduce") == pytest.approx(c.seconds)


def test_tp4_stack_one_allreduce_per_layer_and_sp_turns_them_into_reduce_scatter_plus_all_gather():
    g = _stack(3)
    r = parallel_bound(g, "h100-sxm", parse_layout("tp=4"))
    ar = [c for c in r.stages[0].collectives if c.collective.kind == "all-reduce"]
    assert [c.collective.tensor for c in ar] == ["z0", "z1", "z2"]
    nbytes = 64 * 512 * 2
    assert all(c.seconds == pytest.approx(2 * 3 / 4 * nbytes / NVLINK, rel=1e-12) for c in ar)
    s = parallel_bound(g, "h100-sxm", parse_layout("tp=4,sp"))
    kinds = sorted(c.collective.kind for c in s.stages[0].collectives)
    # z0, z1 feed the sequence-parallel residual adds (reduce-scatter); x1, x2 feed the next TP region
    assert kinds.count("reduce-scatter") == 3 and kinds.count("all-gather") == 2
    assert math_sum(s.stages[0].collectives) == pytest.approx(3 * 3 / 4 * nbytes / NVLINK + 2 * 3 / 4 * nbytes / NVLINK)
    assert s.plan.sp_nodes == frozenset({"res0", "res1", "res2"})


def math_sum(priced) -> float:
    return sum(p.total for p in priced)


def test_tp_over_two_nodes_is_hierarchical():
    g = load(MLP)
    r = parallel_bound(g, None, parse_layout("tp=16"), system="dgx-h100x4")
    (c,) = r.stages[0].collectives
    nbytes = 512 * 1024 * 2
    inside = 2 * 7 / 8 * nbytes / NVLINK
    across = 2 * 1 / 2 * (nbytes / 8) / IB
    assert c.seconds == pytest.approx(max(inside, across), rel=1e-12)
    assert "InfiniBand" in c.links


def test_canonical_ranks_keep_every_count():
    for path in sorted((ROOT / "examples" / "graphs").glob("*.yaml")):
        g = load(path)
        c = canonical(g)
        assert not [i for i in validate(c) if i.severity == "error"], path.name
        a, b = graph_metrics(g), graph_metrics(c)
        assert (a.macs, a.flops, a.bytes, a.boundary_bytes) == (b.macs, b.flops, b.bytes, b.boundary_bytes), path.name


def test_linears_without_a_pair_stay_replicated_and_are_reported():
    g = load(MLP)
    r = parallel_bound(g, "h100-sxm", parse_layout("tp=3"))  # 4096 and 1024 are not divisible by 3
    assert not r.plan.tp_splits and not r.stages[0].collectives
    assert {n for n, _ in r.plan.replicated} == {"fc1", "fc2"}
    assert all("not divisible by 3" in why for _, why in r.plan.replicated)
    one = solar_io.bound(g, "h100-sxm")
    assert r.overlapped["unfused"] == pytest.approx(one.unfused.time, rel=1e-12)


@pytest.mark.parametrize("text, message", [
    ("tp=0", "whole number >= 1"), ("tp=2,tp=4", "given twice"), ("xp=2", "cannot read"),
    ("sp", "give tp>1"), ("dp=6,ep=4", "must divide dp"),
])
def test_bad_layouts_are_one_line(text, message):
    with pytest.raises(ParallelError, match=message):
        parse_layout(text)


def test_layout_numbering_and_defaults():
    lay = make_layout(tp=2, dp=4, ep=2, pp=2)
    assert lay.chips == 16
    assert lay.groups("ep")[:2] == [[0, 2], [1, 3]] and lay.groups("pp")[0] == [0, 8]
    assert parse_layout("ep=4").dp == 4  # dp defaults to ep


def test_too_many_chips_for_the_system_or_the_spec():
    g = load(MLP)
    with pytest.raises(ParallelError, match="system dgx-h100x4 has 32"):
        parallel_bound(g, None, parse_layout("tp=8,dp=8"), system="dgx-h100x4")
    with pytest.raises(ParallelError, match="no scale_out link"):
        parallel_bound(g, "a100-sxm-80gb", parse_layout("tp=8,dp=2"))
    with pytest.raises(ParallelError, match="disagree"):
        parallel_bound(g, "b200", parse_layout("tp=2"), system="dgx-h100")


def test_in_network_allreduce_sends_each_part_once():
    g = load(MLP)
    ring = parallel_bound(g, "h100-sxm", parse_layout("tp=8")).stages[0].collectives[0]
    sharp = parallel_bound(g, "h100-sxm", parse_layout("tp=8"), allreduce="in-network").stages[0].collectives[0]
    nbytes = 512 * 1024 * 2
    assert ring.seconds == pytest.approx(2 * 7 / 8 * nbytes / NVLINK, rel=1e-12)
    assert sharp.seconds == pytest.approx(7 / 8 * nbytes / NVLINK, rel=1e-12)
    with pytest.raises(ParallelError, match="neither ring nor in-network"):
        parallel_bound(g, "h100-sxm", parse_layout("tp=2"), allreduce="tree")


def test_sp_with_pp_sends_the_shard_and_the_next_stage_gathers_it():
    g = _stack(4)  # B=64, D=512, H=2048, bf16; SP splits B (the only token rank)
    r = parallel_bound(g, "h100-sxm", parse_layout("tp=2,pp=2,sp"))
    s0, s1 = r.stages
    act = 64 * 512 * 2
    sends = [c for c in s0.collectives if c.collective.kind == "send/recv"]
    assert [(c.collective.tensor, c.collective.nbytes) for c in sends] == [("x2", act / 2)]  # the SP shard
    gathers = [c.collective.tensor for c in s1.collectives if c.collective.kind == "all-gather"]
    assert gathers[0] == "x2"  # stage 1's first TP region needs the whole of it
    assert all(c.collective.nbytes == act for c in s1.collectives if c.collective.kind == "all-gather")


def test_tp2_cache_aware_is_the_half_mlps_cache_aware_bound_at_a_small_capacity():
    """The cache-aware fidelity of one part with nothing handed over is the single-chip cache-aware bound
    of what the chip runs: the MLP with H = 2048, here at 64 KiB of on-chip memory, where the tiling's
    re-reads move more bytes than the fused bound."""
    g = load(MLP)
    r = parallel_bound(g, "h100-sxm", parse_layout("tp=2"), cache_aware=True, capacity="64KiB")
    assert r.fidelities == ("unfused", "fused", "cache-aware")
    (st,) = r.stages
    (c,) = st.collectives
    half = replace(g, ranks=tuple((k, 2048 if k == "H" else v) for k, v in g.ranks))
    ref = solar_io.bound(half, "h100-sxm", cache_aware=True, capacity="64KiB")
    assert ref.cache_aware.memory_time > ref.fused.memory_time * 1.01
    w = st.work["cache-aware"]
    assert w.time == pytest.approx(ref.cache_aware.time, rel=1e-9)
    assert w.memory == pytest.approx(ref.cache_aware.bytes / 3.35e12, rel=1e-9)  # H100 SXM HBM3, 3.35 TB/s
    assert r.overlapped["cache-aware"] == pytest.approx(max(w.time, c.seconds), rel=1e-12)
    assert r.serial["cache-aware"] == pytest.approx(w.time + c.seconds, rel=1e-12)
    assert any(a.startswith("fidelities: unfused, fused and cache-aware") for a in r.assumptions)
    plain = parallel_bound(g, "h100-sxm", parse_layout("tp=2"))
    assert plain.fidelities == ("unfused", "fused") and "cache-aware" not in plain.stages[0].work


def test_cache_aware_over_parts_handing_tensors_over_is_at_least_the_fused_bound():
    g = _stack(3)
    r = parallel_bound(g, "h100-sxm", parse_layout("tp=4,sp"), cache_aware=True, capacity="256KiB")
    (st,) = r.stages
    assert len(st.parts) > 1
    assert st.work["cache-aware"].time >= st.work["fused"].time
    assert st.work["cache-aware"].compute == st.work["fused"].compute
