"""Attention with an explicit mask is priced at the positions the mask keeps (rules/attention.py, rules/masks.py).

A chunked prefill of C = 64 new tokens after P = 192 cached ones attends query i to keys
0 .. P + i (an offset-causal mask given as a tensor): P + 1 + i keys, so per head
sum_{i<64} (193 + i) = 64 * 193 + 64 * 63 / 2 = 14368 of the 64 * 256 = 16384 rectangle.
A flash kernel with that mask skips whole masked blocks only, so it does at least this work;
the nodes still iterate the rectangle (MACs as FlopCounterMode counts), with density 14368/16384
on every (S, T) tensor. A mask whose values are not known at capture (a graph input) keeps, for
any mask with a defined softmax, at least one key per query row: density 1/T; unless its values
are bounded above the masking fill (a boolean input times -2.0): then it hides nothing.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from paths import ROOT  # noqa: E402

from solar_io import bound, graph_metrics  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402
from solar_io.frontends.torch.phases import Step  # noqa: E402

EXAMPLE = ROOT / "examples" / "models" / "llama_kv.py"
H, HD, LAYERS = 4, 16, 2           # llama_kv.py's tiny shape: 4 query heads of 16, 2 layers
C, P = 64, 192
KEPT = C * (P + 1) + C * (C - 1) // 2  # 14368, by hand
RECT = C * (P + C)                     # 16384
assert KEPT == sum(1 for i in range(C) for j in range(P + C) if j <= P + i) == 14368


def _attn(g, suffix):  # noqa: ANN001, ANN202
    return [i for i, n in enumerate(g.nodes) if n.op == "aten.scaled_dot_product_attention" and n.name.endswith(suffix)]


def test_chunked_prefill_priced_at_the_offset_triangle():
    g = capture_file(EXAMPLE, step=Step("prefill", batch=1, seq=C, kv_len=P))
    assert g.validation.status == "passed", g.validation.reason
    m, b = graph_metrics(g), bound(g, "h100-sxm")
    qk, pv = _attn(g, ".scores"), _attn(g, ".grouped")  # QK^T and PV of each layer (GQA: grouped)
    assert len(qk) == len(pv) == LAYERS
    for i in qk + pv:
        assert b.nodes[i].effectual_fraction == pytest.approx(KEPT / RECT)
    for i in qk[:1] + pv[:1]:
        assert m.nodes[i].macs == H * RECT * HD                         # the rectangle, as the math kernel
        assert m.nodes[i].macs * b.nodes[i].effectual_fraction == pytest.approx(H * KEPT * HD)  # by hand
    for i in qk[1:] + pv[1:]:  # the logits read the last position only: the last layer attends from it alone
        assert m.nodes[i].macs == H * 1 * (P + C) * HD and len(g.nodes[i].live) == 1
    assert "14368 of 16384" in dict(g.nodes[qk[0]].attrs)["masked_work"]
    (mask,) = [dict(a.values) for a in g.assumptions if a.kind == "attention_mask"]
    assert mask["kept"] == KEPT and mask["positions"] == RECT and mask["known"] is True
    assert mask["calls"] == LAYERS and mask["unattended_keys"] == 0  # the last query sees every key


MASKED = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    C, P, KIND = {c}, {p}, {kind!r}


    class Model(nn.Module):
        def forward(self, q, k, v, *given):
            if KIND == "input":
                mask = given[0]
            elif KIND == "input_fill":  # -inf where the input says so: any position may be hidden
                mask = torch.zeros(C, P + C, device=q.device).masked_fill(~given[0], float("-inf"))
            elif KIND == "input_finite":  # a finite penalty: no position can be hidden
                mask = given[0].float() * -2.0
            elif KIND == "neg_inf":  # additive: -inf above the offset diagonal
                mask = torch.full((C, P + C), float("-inf"), device=q.device).triu(P + 1)
            else:                    # Hugging Face's fill: the dtype's most negative finite value
                j = torch.arange(P + C, device=q.device)[None, :]
                i = torch.arange(C, device=q.device)[:, None] + P
                mask = torch.zeros(C, P + C, device=q.device).masked_fill(j > i, torch.finfo(torch.float32).min)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


    def get_inputs():
        q, k, v = torch.randn(1, 2, C, 8), torch.randn(1, 2, P + C, 8), torch.randn(1, 2, P + C, 8)
        if KIND.startswith("input"):
            return [q, k, v, torch.ones(C, P + C, dtype=torch.bool).tril(P)]
        return [q, k, v]
''')


@pytest.mark.parametrize("kind", ["neg_inf", "finfo_min"])
def test_additive_masks_from_their_construction(tmp_path: Path, kind: str):
    c, p = 6, 10  # query i keeps keys 0 .. 10 + i: 6 * 11 + 15 = 81 of 96
    f = tmp_path / f"{kind}.py"
    f.write_text(MASKED.format(c=c, p=p, kind=kind))
    g = capture_file(f)
    assert g.validation.status == "passed", g.validation.reason
    (qk,) = _attn(g, ".scores")
    assert bound(g, "h100-sxm").nodes[qk].effectual_fraction == pytest.approx(81 / 96)
    (mask,) = [dict(a.values) for a in g.assumptions if a.kind == "attention_mask"]
    assert (mask["kept"], mask["positions"], mask["known"]) == (81, 96, True)


@pytest.mark.parametrize("kind", ["input", "input_fill"])
def test_mask_of_unknown_values_keeps_one_key_per_row(tmp_path: Path, kind: str):
    c, p = 6, 10
    f = tmp_path / "given.py"
    f.write_text(MASKED.format(c=c, p=p, kind=kind))
    g = capture_file(f)
    assert g.validation.status == "passed", g.validation.reason
    (qk,) = _attn(g, ".scores")
    (pv,) = [i for i, n in enumerate(g.nodes) if n.op == "aten.scaled_dot_product_attention"
             and n.kind == "einsum" and any(a.tensor == "v" for a in n.inputs)]
    b = bound(g, "h100-sxm")
    for i in (qk, pv):  # the input's own values keep 81 of 96; a bound for every mask may count only 6
        assert b.nodes[i].effectual_fraction == pytest.approx(1 / (p + c))
    (a,) = [a for a in g.assumptions if a.kind == "attention_mask"]
    assert dict(a.values)["kept"] == c and dict(a.values)["known"] is False
    assert "graph input" in a.detail


def test_a_finite_additive_mask_of_unknown_values_hides_nothing(tmp_path: Path):
    c, p = 6, 10  # mask = input * -2.0 lies in [-2, 0]: every position keeps its score
    f = tmp_path / "finite.py"
    f.write_text(MASKED.format(c=c, p=p, kind="input_finite"))
    g = capture_file(f)
    assert g.validation.status == "passed", g.validation.reason
    (qk,) = _attn(g, ".scores")
    assert bound(g, "h100-sxm").nodes[qk].effectual_fraction == 1.0
    (a,) = [a for a in g.assumptions if a.kind == "attention_mask"]
    assert (dict(a.values)["kept"], dict(a.values)["known"]) == (c * (p + c), False)
    assert "at least -2" in a.detail
