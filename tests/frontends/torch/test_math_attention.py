"""Attention written as math with a known -inf mask (frontends/torch/math_attention.py): its score
tensors at the fraction the mask keeps, as the sdpa rule prices ``is_causal``.

Hand counts, B=1, H=2, S=T=8, E=4: q k^T and p v are 2 * 8 * 8 * 4 = 512 MACs each over the rectangle;
``triu(full(-inf), 1)`` keeps the lower triangle with the diagonal, 36 of 64 positions, so a kernel
skipping the masked blocks does 36/64 of each: 288 effectual MACs per contraction.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from solar_io import bound, graph_metrics  # noqa: E402
from solar_io.frontends.torch.capture import capture_file  # noqa: E402

HEAD = """
import torch
import torch.nn.functional as F

class Model(torch.nn.Module):
    def forward(self, q, k, v):
        w = torch.matmul(q, k.transpose(2, 3)) * 0.5
"""
TAIL = """
def get_inputs():
    return [torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4)]
"""
CAUSAL = HEAD + """
        w = w + torch.triu(torch.full((8, 8), float("-inf")), diagonal=1)
        p = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(p, v)
""" + TAIL


def _capture(tmp_path: Path, text: str):
    p = tmp_path / "attn.py"
    p.write_text(textwrap.dedent(text))
    g = capture_file(p)
    assert g.validation.status == "passed", g.validation.reason
    return g


def _contractions(g):
    return [n for n in g.nodes if n.kind == "einsum" and n.map == "mul" and n.reduce == "add"]


def test_a_causal_math_attention_is_priced_at_the_triangle(tmp_path: Path):
    g = _capture(tmp_path, CAUSAL)
    qk, pv = _contractions(g)
    tmap = g.tensor_map
    assert tmap[qk.outputs[0].tensor].density == 36 / 64
    p = [a.tensor for a in pv.inputs if tmap[a.tensor].density is not None]
    assert [tmap[t].density for t in p] == [36 / 64]
    rows = {n.name: n for n in bound(g, "h100-sxm").nodes}
    assert graph_metrics(g).macs == 2 * 512
    assert rows[qk.name].effectual_fraction == 36 / 64 and rows[pv.name].effectual_fraction == 36 / 64
    (said,) = [a for a in g.assumptions if a.kind == "attention_mask"]
    assert dict(said.values) == {"regions": 1, "kept_fraction": (36 / 64,)}


GIVEN = """
import torch
import torch.nn.functional as F

class Model(torch.nn.Module):
    def forward(self, q, k, v, m):
        w = torch.matmul(q, k.transpose(2, 3)) * 0.5 + m
        return torch.matmul(F.softmax(w, dim=-1), v)

def get_inputs():
    x = torch.randn(1, 2, 8, 4)
    return [x, x, x, torch.zeros(8, 8).masked_fill(torch.ones(8, 8).triu(1).bool(), float("-inf"))]
"""


def test_a_mask_of_unknown_values_or_a_returned_probability_changes_nothing(tmp_path: Path):
    """A mask given as an input (its values are the caller's) and a probability tensor the program
    returns (a reader of the masked positions) keep every score tensor dense."""
    returned = CAUSAL.replace("return torch.matmul(p, v)", "return torch.matmul(p, v), p")
    for text in (GIVEN, returned):
        g = _capture(tmp_path, text)
        assert all(t.density is None for t in g.tensors)
        assert not [a for a in g.assumptions if a.kind == "attention_mask"]


@pytest.mark.parametrize("masking", [
    # masked_fill of the scores through ~tril(ones).bool(): where(cond, -inf, scores)
    "w = w.masked_fill(~torch.tril(torch.ones(8, 8)).bool(), float('-inf'))",
    # where(tril, scores, finfo.min): the Hugging Face spelling, a finite minimum whose exp underflows to 0
    "w = torch.where(torch.tril(torch.ones(8, 8)).bool(), w, torch.finfo(torch.float32).min)",
    # an additive mask of finfo.min above the diagonal
    "w = w + torch.triu(torch.full((8, 8), torch.finfo(torch.float32).min), diagonal=1)",
])
def test_masked_fill_and_finfo_min_masks_keep_the_triangle(tmp_path: Path, masking: str):
    text = CAUSAL.replace('w = w + torch.triu(torch.full((8, 8), float("-inf")), diagonal=1)', masking)
    g = _capture(tmp_path, text)
    qk, pv = _contractions(g)
    assert g.tensor_map[qk.outputs[0].tensor].density == 36 / 64
    rows = {n.name: n for n in bound(g, "h100-sxm").nodes}
    assert rows[pv.name].effectual_fraction == 36 / 64


def test_a_fill_above_the_dtypes_minimum_is_no_mask(tmp_path: Path):
    """-1e30 is not fp32's minimum: counted as kept, as the sdpa rule counts masks (every position dense)."""
    text = CAUSAL.replace('float("-inf")), diagonal=1)', '-1e30), diagonal=1)')
    g = _capture(tmp_path, text)
    assert all(t.density is None for t in g.tensors)



def test_a_cast_mask_is_judged_in_the_dtype_it_is_added_in(tmp_path: Path):
    """fp16's minimum (-65504) cast to fp32 is no longer its dtype's minimum: every position dense."""
    text = CAUSAL.replace('torch.triu(torch.full((8, 8), float("-inf")), diagonal=1)',
                          'torch.triu(torch.full((8, 8), torch.finfo(torch.float16).min, dtype=torch.float16), '
                          'diagonal=1).float()')
    g = _capture(tmp_path, text)
    assert all(t.density is None for t in g.tensors)
