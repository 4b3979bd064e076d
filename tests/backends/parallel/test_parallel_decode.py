"""A Llama-shaped decode step (plain PyTorch, KV cache inputs) on 8 H100 SXM with TP=8: the all-reduce
time per token (issue 22, done-when; the full 70B shape is the README's example)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


from paths import ROOT

from solar_io import graph_metrics  # noqa: E402
from solar_io.backends.parallel import parallel_bound, parse_layout  # noqa: E402
from solar_io.frontends.select import capture  # noqa: E402

MODEL = ROOT / "examples" / "models" / "llama_decode.py"
NVLINK = 4.5e11  # H100 SXM, bytes/s per GPU each way


@pytest.fixture(scope="module")
def decode():
    # Small: 2 blocks, width 64, 8 query and 8 KV heads of 8, batch 2, 32 cached tokens, fp32
    return capture(MODEL, "torch", entry=f"{MODEL}:Small", inputs_from="small_inputs", validate=False)


def test_tp8_decode_two_allreduces_per_block(decode):
    r = parallel_bound(decode, "h100-sxm", parse_layout("tp=8"))
    (st,) = r.stages
    ar = [c for c in st.collectives if c.collective.kind == "all-reduce"]
    assert len(ar) == 2 * 2 and len(st.collectives) == 4  # attention output and MLP down projection, per block
    nbytes = 2 * 64 * 4  # the residual stream of 2 tokens, width 64, fp32
    per = 2 * (8 - 1) / 8 * nbytes / NVLINK
    assert all(c.collective.nbytes == nbytes and c.seconds == pytest.approx(per, rel=1e-12) for c in ar)
    assert r.collective_seconds("all-reduce") == pytest.approx(4 * per, rel=1e-12)  # per decode step (token)
    # q, k, v, gate, up per block and the LM head (vocabulary-parallel, alone) | o, down; nothing replicated
    assert len(r.plan.row) == 4 and len(r.plan.column) == 2 * 5 + 1 and not r.plan.replicated
    head = r.plan.column[-1]
    logits = decode.node_map[head].outputs[0].tensor
    assert decode.shape(logits) == (2, 256) and r.plan.graph.shape(logits) == (2, 256 // 8)  # left split


def test_tp8_splits_the_kv_cache_and_the_blocks_by_heads(decode):
    r = parallel_bound(decode, "h100-sxm", parse_layout("tp=8"))
    g, c = decode, r.plan.graph
    caches = [t.name for t in g.tensors if t.role == "input" and len(t.ranks) == 4]
    assert len(caches) == 4
    for name in caches:  # each chip holds one KV head of each cache: [2, 1, 32, 8]
        assert c.shape(name) == (2, 1, 32, 8) and g.shape(name) == (2, 8, 32, 8)
    assert graph_metrics(c).macs * 8 == graph_metrics(g).macs  # every contraction is split 8 ways


def test_dp4_of_a_captured_training_step_all_reduces_every_weight_gradient():
    from solar_io.frontends.common.training import TrainSpec

    mlp = MODEL.parents[2] / "tests" / "models" / "mlp.py"  # Linear 64->256, 256->256, 256->10, fp32
    g = capture(mlp, "torch", train=TrainSpec(loss="sum", optimizer="sgd"), validate=False)
    r = parallel_bound(g, "h100-sxm", parse_layout("dp=4"))
    (c,) = [c for c in r.stages[0].collectives if c.collective.dim == "dp"]
    params = 64 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10  # weights and biases: 6 gradients
    assert c.collective.tensor == "6 gradients" and c.collective.nbytes == 4 * params
    assert c.seconds == pytest.approx(2 * 3 / 4 * 4 * params / NVLINK, rel=1e-12)
    assert r.overlapped["fused"] <= r.overlapped["unfused"] and r.serial["unfused"] > r.overlapped["unfused"]
