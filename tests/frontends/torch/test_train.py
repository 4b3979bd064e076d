"""Training-step capture (issue 22 items 1-2): phases, MACs against hand counts and FlopCounterMode,
optimizer bytes by hand, fused backward rules (not opaque), validation against eager autograd."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from inprocess import run_main  # noqa: E402
from paths import ROOT  # noqa: E402

from solar_io.frontends.common.training import TrainSpec  # noqa: E402
from solar_io.frontends.torch.loader import load_source  # noqa: E402
from solar_io.frontends.torch.train import FlashAttention, capture_train, first_output  # noqa: E402
from solar_io.metrics import graph_metrics, tensor_bytes  # noqa: E402
from solar_io.training import live_activations  # noqa: E402

MLP = """
import torch
from torch import nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(8, 16), nn.Linear(16, 4)
    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))
def get_inputs():
    return [torch.randn(6, 8)]
"""

#: The training rules the tests below see lowered (each set is asserted present in a captured step);
#: tests/frontends/torch/test_torch_corpus.py::test_every_rule_is_tested counts them as tested.
FLASH_RULES = {"aten.convolution_backward", "aten._scaled_dot_product_flash_attention",
               "aten._scaled_dot_product_flash_attention_backward"}
EFFICIENT_RULES = {"aten._scaled_dot_product_efficient_attention",
                   "aten._scaled_dot_product_efficient_attention_backward"}
GQA_MASK_RULES = {"solar_io.masked_attention", "solar_io.masked_attention_backward"}
TRAINING_RULES = FLASH_RULES | EFFICIENT_RULES | GQA_MASK_RULES

MIX = """
GROUPS = 1
import torch
from torch import nn
import torch.nn.functional as F
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.e, self.ln = nn.Embedding(50, 32), nn.LayerNorm(32)
        self.q, self.kv = nn.Linear(32, 32), nn.Linear(32, 32)
        self.c = nn.Conv1d(32, 32, 3, padding=1, groups=GROUPS)
        self.c2, self.gn = nn.Conv2d(2, 4, 3, stride=2, padding=1), nn.GroupNorm(2, 4)
    def forward(self, ids):
        x = self.ln(self.e(ids))
        q = self.q(x).view(2, 10, 4, 8).transpose(1, 2)
        k, v = self.kv(x).view(2, 10, 4, 8).transpose(1, 2).chunk(2, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        o = self.c(o.transpose(1, 2).reshape(2, 10, 32).transpose(1, 2))
        return F.gelu(self.gn(self.c2(o.view(2, 2, 16, 10))))
def get_inputs():
    return [torch.randint(0, 50, (2, 10))]
"""


def _source(tmp_path: Path, text: str, dtype: str | None = None):  # noqa: ANN202
    p = tmp_path / "model.py"
    p.write_text(text)
    return load_source(p, dtype=dtype)


def flop_counter_macs(source, loss: str = "sum") -> int:  # noqa: ANN001
    """FlopCounterMode's MACs of the eager step on meta tensors: forward, loss, autograd backward
    (attention through the flash kernel, as the capture routes it; FlopCounterMode counts its
    backward with the recomputed scores)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = source.model("meta")
    args = source.inputs("meta")
    with torch.device("meta"), FlashAttention(), FlopCounterMode(display=False) as fc:
        out = first_output(model(*args))
        if loss == "sum":
            value = out.sum()
        else:
            value = torch.nn.functional.mse_loss(out, torch.randn(out.shape))
        torch.autograd.grad(value, [p for p in model.parameters() if p.requires_grad])
    return fc.get_total_flops() // 2


def test_mlp_step_macs_phases_and_validation(tmp_path: Path) -> None:
    src = _source(tmp_path, MLP)
    g = capture_train(src, TrainSpec(loss="mse", optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    m, d, h, o = 6, 8, 16, 4
    forward = m * d * h + m * h * o
    # backward: both weight gradients (one forward each) and the input gradient of layer 2; the model's
    # input needs no gradient, so layer 1's is not computed: 3x the forward less m*d*h
    assert graph_metrics(g).macs == 3 * forward - m * d * h
    assert graph_metrics(g).macs == flop_counter_macs(src, "mse")
    by_phase: dict[str, int] = {}
    for n, nm in zip(g.nodes, graph_metrics(g).nodes, strict=True):
        by_phase[n.phase] = by_phase.get(n.phase, 0) + nm.macs
    assert by_phase["forward"] == forward and by_phase["backward"] == 2 * forward - m * d * h
    assert {n.phase for n in g.nodes} == {"forward", "loss", "backward"}
    outs = {t.name for t in g.tensors if t.role == "output"}
    assert {"l1.weight.grad", "l1.bias.grad", "l2.weight.grad", "l2.bias.grad"} <= outs
    (a,) = g.assumptions
    assert a.kind == "training" and dict(a.values)["optimizer"] == "none"


def _optimizer_bytes(g) -> float:  # noqa: ANN001
    """Bytes the optimizer phase moves: what its nodes read that no optimizer node wrote, and the
    graph outputs they write."""
    opt = [n for n in g.nodes if n.phase == "optimizer"]
    written = {a.tensor for n in opt for a in n.outputs}
    read = {a.tensor for n in opt for a in n.inputs} - written
    tm = g.tensor_map
    return sum(tensor_bytes(g, tm[t]) for t in read | {t for t in written if tm[t].role == "output"})


@pytest.mark.parametrize(("master", "per_param"), [("fp32", 2 + 3 * 4 + 3 * 4 + 2), (None, 4 * 2 + 3 * 2)])
def test_adamw_bytes_by_hand(tmp_path: Path, master: str | None, per_param: int) -> None:
    # bf16 parameters: with fp32 master weights and moments, per parameter read g (2) + m, v, master (3 x 4),
    # write m, v, master (3 x 4) and the bf16 parameter (2) = 28 bytes; without a master, every tensor is
    # bf16: read g, m, v, w (4 x 2), write m, v, w (3 x 2) = 14 bytes
    src = _source(tmp_path, MLP, dtype="bf16")
    g = capture_train(src, TrainSpec(optimizer="adamw", master_dtype=master), validate=master is not None)
    params = 8 * 16 + 16 + 16 * 4 + 4
    assert _optimizer_bytes(g) == per_param * params
    opt = [n for n in g.nodes if n.phase == "optimizer"]
    assert {n.kernel for n in opt} == {f"adamw:{p}" for p in ("l1.weight", "l1.bias", "l2.weight", "l2.bias")}
    assert {a.tensor for n in opt for a in n.inputs} >= {"l1.weight.grad", "l2.bias.grad"}
    if master:
        assert g.validation.status == "passed", g.validation.reason


def test_sgd_update_validates(tmp_path: Path) -> None:
    g = capture_train(_source(tmp_path, MLP), TrainSpec(loss="ce", optimizer="sgd"))
    assert g.validation.status == "passed", g.validation.reason
    assert _optimizer_bytes(g) == 3 * 4 * (8 * 16 + 16 + 16 * 4 + 4)  # read g, w; write w (fp32)


def test_conv_attention_norm_embedding_backward_lowered(tmp_path: Path) -> None:
    src = _source(tmp_path, MIX)
    g = capture_train(src, TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    assert not [n for n in g.nodes if n.kind == "opaque"]
    ops = {n.op for n in g.nodes if n.phase == "backward"}
    assert {"aten.convolution_backward", "aten._scaled_dot_product_flash_attention_backward"} <= ops
    assert FLASH_RULES <= {n.op for n in g.nodes}
    assert graph_metrics(g).macs == flop_counter_macs(src)
    causal = [t for t in g.tensors if t.density is not None]
    assert causal and all(t.density == pytest.approx(55 / 100) for t in causal)  # tril of 10 x 10
    live = live_activations(g)
    assert 0 < live.saved <= live.peak


def test_grouped_conv_weight_gradient_by_hand(tmp_path: Path) -> None:
    # dw of a grouped convolution: one forward's MACs, N*K*(C/g)*P*R = 2*32*16*10*3; FlopCounterMode's
    # convolution_backward formula ignores groups for the weight gradient (counts g times that), so this
    # is checked by hand
    g = capture_train(_source(tmp_path, MIX.replace("GROUPS = 1", "GROUPS = 2")), TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    m = {n.name: nm.macs for n, nm in zip(g.nodes, graph_metrics(g).nodes, strict=True)}
    assert m["convolution.conv"] == 2 * 32 * 16 * 10 * 3
    assert m["convolution_backward_1_grad_weight.grouped"] == m["convolution.conv"]
    assert m["convolution_backward_1_grad_input.cols"] == m["convolution.conv"]


@pytest.mark.parametrize("name", ["transformer_block.py", "resnet_block.py", "llama_block.py"])
def test_corpus_macs_match_flop_counter(name: str) -> None:
    src = load_source(ROOT / "tests" / "models" / name)
    g = capture_train(src, TrainSpec(optimizer="none"), validate=False)
    assert not [n for n in g.nodes if n.kind == "opaque"]
    assert graph_metrics(g).macs == flop_counter_macs(src)


def test_cli_train_errors(tmp_path: Path) -> None:
    p = tmp_path / "model.py"
    p.write_text(MLP)
    r = run_main("capture", str(p), "--train", "--loss", "hinge")
    assert r.returncode != 0 and "bad --loss 'hinge'" in r.stderr and "Traceback" not in r.stderr
    r = run_main("capture", str(p), "--train", "--optimizer", "none", "--master-dtype", "fp32")
    assert r.returncode != 0 and "--master-dtype needs an optimizer" in r.stderr


MASKED = """
import torch
from torch import nn
import torch.nn.functional as F
KIND = "bool"
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(32, 32) for _ in range(4))
        if KIND == "learned":
            self.bias = nn.Parameter(torch.randn(4, 10, 12) * 0.1)
    def forward(self, x, y, mask):
        q = self.q(x).view(2, 10, 4, 8).transpose(1, 2)
        k = self.k(y).view(2, 12, 4, 8).transpose(1, 2)
        v = self.v(y).view(2, 12, 4, 8).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask + self.bias if KIND == "learned" else mask)
        return self.o(o.transpose(1, 2).reshape(2, 10, 32))
def get_inputs():
    x, y = torch.randn(2, 10, 32), torch.randn(2, 12, 32)
    if KIND == "bool":
        m = torch.rand(2, 1, 10, 12) > 0.4
        m[..., 0] = True
        return [x, y, m]
    return [x, y, torch.randn(10, 12)]
"""


def _kernel_bytes(g) -> dict[str, tuple[dict[str, float], dict[str, float]]]:  # noqa: ANN001
    """{kernel: (bytes read by root, bytes written)} of the unfused bound's kernels."""
    from solar_io.backends.traffic.graph import traffic_of
    from solar_io.backends.traffic.kernels import kernel_groups, kernel_traffic

    gt = traffic_of(g)
    groups = kernel_groups(g, spans=gt.spans)
    return {g.nodes[k[0]].kernel or g.nodes[k[0]].name: (dict(t.reads), dict(t.writes))
            for k, t in zip(groups, kernel_traffic(g, gt.nodes, groups, gt.exposed), strict=True)}


@pytest.mark.parametrize(("kind", "mask_bytes"), [("bool", 2 * 1 * 10 * 12), ("additive", 10 * 12 * 4)])
def test_masked_attention_is_fused(tmp_path: Path, kind: str, mask_bytes: int) -> None:
    # a mask (boolean [2, 1, S, T] or additive [S, T]) routes sdpa to the memory-efficient kernel: a fused
    # forward and backward, each reading the mask once at its own shape; no S x T tensor crosses memory
    src = _source(tmp_path, MASKED.replace('KIND = "bool"', f'KIND = "{kind}"'))
    g = capture_train(src, TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    assert EFFICIENT_RULES <= {n.op for n in g.nodes}
    assert not [n for n in g.nodes if n.kind == "opaque"]
    b, h, s, t, e = 2, 4, 10, 12, 8
    linears = (b * s + 2 * b * t + b * s) * 32 * 32
    forward = linears + b * h * s * t * (e + e)
    # backward: every weight gradient, the input gradient of self.o only (x, y need none), and the fused
    # attention backward with its recomputed scores (3 S*T*E + 2 S*T*Ev)
    assert graph_metrics(g).macs == forward + linears + b * s * 32 * 32 + b * h * s * t * (3 * e + 2 * e)
    assert graph_metrics(g).macs == flop_counter_macs(src)
    kb = _kernel_bytes(g)
    q = o = d_o = b * s * 32 * 4
    k = v = b * t * 32 * 4
    lse = b * h * s * 4
    (fwd,) = [x for n, x in kb.items() if n.startswith("_scaled_dot_product_efficient_attention")
              and "backward" not in n]
    (bwd,) = [x for n, x in kb.items() if n.startswith("_scaled_dot_product_efficient_attention_backward")]
    assert sum(fwd[0].values()) == q + k + v + mask_bytes and sum(fwd[1].values()) == o + lse
    assert sum(bwd[0].values()) == d_o + q + k + v + mask_bytes + o + lse
    assert sum(bwd[1].values()) == q + k + v  # dQ, dK, dV
    crossing = {x for r, w in kb.values() for x in (*r, *w)}
    assert [x for x in crossing if g.shape(x)[-2:] == (s, t)] == ["args_2"]  # the mask only


def test_learned_attention_bias_gradient(tmp_path: Path) -> None:
    # an additive mask from a parameter ([H, S, T], broadcast over the batch): the fused backward writes its
    # gradient summed over the batch; the update validates against eager autograd
    g = capture_train(_source(tmp_path, MASKED.replace('KIND = "bool"', 'KIND = "learned"')), TrainSpec())
    assert g.validation.status == "passed", g.validation.reason
    (bwd,) = [n for n in g.nodes if n.op.endswith("efficient_attention_backward") and n.name.endswith("dbias")]
    assert "bias.grad" in {a.tensor for n in g.nodes if n.phase == "optimizer" for a in n.inputs}
    assert bwd.reduce == "add"


RESIDUAL_MLP = """
import torch
from torch import nn
class Layer(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.up, self.down = nn.Linear(d, h), nn.Linear(h, d)
    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(Layer(8, 16), Layer(8, 16))
    def forward(self, x):
        return self.layers(x)
def get_inputs():
    return [torch.randn(6, 8)]
"""


def test_recompute_two_layer_mlp_by_hand(tmp_path: Path) -> None:
    # two residual MLP layers x_{l+1} = x_l + down(gelu(up(x_l))), B=6, d=8, h=16, mse loss. The cuts are
    # x1 and x2 (the residual branch bypasses everything inside a layer). Without recompute the forward
    # saves up's output and gelu's per layer (B*h*4 = 384 B each) and x1, x2 (B*d*4 = 192 B each);
    # with it, only x1 and x2. The backward re-runs per layer up and gelu (the backward reads gelu's input
    # and output), not down (only the residual add reads its output): MACs rise by 2*B*d*h
    src = _source(tmp_path, RESIDUAL_MLP)
    base = capture_train(src, TrainSpec(loss="mse", optimizer="none"))
    g = capture_train(src, TrainSpec(loss="mse", optimizer="none", recompute=True))
    assert g.validation.status == "passed", g.validation.reason
    b, d, h = 6, 8, 16
    assert graph_metrics(base).macs == flop_counter_macs(src, "mse")
    assert graph_metrics(g).macs == graph_metrics(base).macs + 2 * b * d * h
    before, after = live_activations(base), live_activations(g)
    assert before.saved == 4 * b * h * 4 + 2 * b * d * 4 and after.saved == 2 * b * d * 4
    # the peak is in layer 2's backward; layer 1's saved up and gelu outputs are no longer live there
    assert after.peak == before.peak - 2 * b * h * 4
    clones = [n for n in g.nodes if n.name.startswith("recompute:")]
    assert {n.op for n in clones} == {"aten.addmm", "aten.gelu"} and {n.phase for n in clones} == {"backward"}
    assert {dict(n.attrs)["recompute"] for n in clones} == {"addmm.mm", "addmm", "gelu", "addmm_2.mm", "addmm_2",
                                                               "gelu_1"}
    names = [n.name for n in g.nodes]
    assert names.index("recompute:gelu_1") < names.index("recompute:addmm.mm")  # layer 2's backward runs first
    reads = {a.tensor for n in g.nodes if n.phase == "backward" and not n.name.startswith("recompute:")
             for a in n.inputs}
    assert "gelu" not in reads and "recompute:gelu" in reads
    (rec,) = [a for a in g.assumptions if a.kind == "recompute"]
    v = dict(rec.values)
    assert v["recomputed_macs"] == 2 * b * d * h and v["peak_live_bytes"] == after.peak
    assert v["peak_live_bytes_without"] == before.peak


def test_recompute_llama_block(tmp_path: Path) -> None:
    # a Llama block (flash attention, RMSNorm, rotary, SwiGLU; B=2, S=16, d=64, 4 heads, 2 KV heads, ff=160):
    # the backward re-runs the whole forward but the o and down projections (their outputs feed only the
    # residual adds), flash attention included as one kernel; the step still validates
    src = load_source(ROOT / "tests" / "models" / "llama_block.py")
    base = capture_train(src, TrainSpec(optimizer="none"), validate=False)
    g = capture_train(src, TrainSpec(optimizer="none", recompute=True))
    assert g.validation.status == "passed", g.validation.reason
    t = 2 * 16
    q, kv, attn, o, ff = t * 64 * 64, t * 64 * 32, 2 * 4 * 16 * 16 * (16 + 16), t * 64 * 64, t * 64 * 160
    assert graph_metrics(g).macs - graph_metrics(base).macs == q + 2 * kv + attn + 2 * ff
    assert graph_metrics(base).macs == flop_counter_macs(src)
    assert sum(nm.macs for n, nm in zip(base.nodes, graph_metrics(base).nodes, strict=True)
               if n.phase == "forward") == q + 2 * kv + attn + o + 3 * ff  # o and down are not re-run
    flash = [n for n in g.nodes if n.kernel == "recompute:_scaled_dot_product_flash_attention"]
    names = [n.name for n in g.nodes]
    assert flash and names.index(flash[-1].name) - names.index(flash[0].name) == len(flash) - 1
    assert live_activations(g).saved < live_activations(base).saved


def test_cli_recompute(tmp_path: Path) -> None:
    p = tmp_path / "model.py"
    p.write_text(RESIDUAL_MLP)
    out = tmp_path / "step.yaml"
    r = run_main("capture", str(p), "--recompute")
    assert r.returncode != 0 and "--recompute changes a training step: give --train" in r.stderr
    r = run_main("capture", str(p), "--train", "--loss", "mse", "--recompute", "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = run_main("bound", str(out), "--hw", "h100-sxm")
    assert r.returncode == 0, r.stderr
    assert "recompute (activation checkpointing): 6 forward nodes re-run in the backward (1536 MACs)" in r.stdout
    # the re-run MACs count in the backward's row, the forward's stays 2 layers x (up + down) = 2 * 2 * 6*8*16
    assert re.search(r"forward\s+\d+ kernels\s+3072 MACs", r.stdout), r.stdout


GQA_MASKED = MASKED.replace("(nn.Linear(32, 32) for _ in range(4))", "nn.Linear(32, 32), nn.Linear(32, 16), "
                            "nn.Linear(32, 16), nn.Linear(32, 32)").replace(
    "view(2, 12, 4, 8)", "view(2, 12, 2, 8)").replace("attn_mask=mask + self.bias if KIND == \"learned\" else mask)",
                                                      "attn_mask=mask + self.bias if KIND == \"learned\" else mask, "
                                                      "enable_gqa=True)")


@pytest.mark.parametrize(("kind", "mask_bytes"), [("bool", 2 * 1 * 10 * 12), ("learned", 0)])
def test_grouped_masked_attention_is_fused(tmp_path: Path, kind: str, mask_bytes: int) -> None:
    # grouped-query heads (4 query heads, 2 KV heads) with a mask: no PyTorch kernel has both, so the
    # capture routes to solar_io::masked_attention (gqa_attention.py): K and V are read once per KV head,
    # dK/dV written at the KV heads, no S x T tensor but the mask crosses memory; validated (a learned
    # [H, S, T] bias gets its gradient). FlopCounterMode does not count the custom op: MACs by hand
    src = _source(tmp_path, GQA_MASKED.replace('KIND = "bool"', f'KIND = "{kind}"'))
    g = capture_train(src, TrainSpec(optimizer="none"))
    assert g.validation.status == "passed", g.validation.reason
    assert GQA_MASK_RULES <= {n.op for n in g.nodes}
    assert not [n for n in g.nodes if n.kind == "opaque"]
    b, h, s, t, e = 2, 4, 10, 12, 8
    linears = (2 * b * s * 32 + 2 * b * t * 16) * 32
    attention = b * h * s * t * (e + e) + b * h * s * t * (3 * e + 2 * e)
    assert graph_metrics(g).macs == 2 * linears + b * s * 32 * 32 + attention
    assert graph_metrics(g).macs == flop_counter_macs(src) + attention
    kb = _kernel_bytes(g)
    (fwd,) = [x for n, x in kb.items() if n == "solar_io::masked_attention" or n.endswith("masked_attention")]
    (bwd,) = [x for n, x in kb.items() if n.endswith("masked_attention_backward")]
    q = o = b * s * 32 * 4
    k = v = b * t * 16 * 4
    mask = mask_bytes or 4 * s * t * 4  # the learned mask: mask + bias, [H, S, T] fp32
    assert sum(fwd[0].values()) == q + k + v + mask and sum(fwd[1].values()) == o + b * h * s * 4
    assert sum(bwd[1].values()) == q + k + v + (4 * s * t * 4 if kind == "learned" else 0)
    crossing = {x for r, w in kb.values() for x in (*r, *w)}
    # only mask-shaped S x T tensors (the mask, the bias, their sum, the bias gradient) cross memory, never
    # the [B, H, S, T] scores or probabilities
    assert all(math.prod(g.shape(x)) <= h * s * t for x in crossing if g.shape(x)[-2:] == (s, t))
