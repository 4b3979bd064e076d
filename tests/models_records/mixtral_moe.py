"""A tiny sparse MoE block in the pattern of transformers' MixtralSparseMoeBlock: softmax router,
top-k experts renormalised, expert outputs scattered back with ``index_add_`` into a buffer. The
buffers come from ``torch.empty_like`` (uninitialised), one zeroed before the scatter, one fully
overwritten by ``copy_``; every expert runs on all tokens (masked by its routing weight) so the
shapes do not depend on the routing."""

import torch
import torch.nn.functional as F
from torch import nn


class Expert(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Model(nn.Module):
    def __init__(self, hidden: int = 16, ffn: int = 32, experts: int = 4, top_k: int = 2):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(Expert(hidden, ffn) for _ in range(experts))

    def forward(self, hidden_states):
        b, s, h = hidden_states.shape
        x = hidden_states.view(-1, h)
        weights = F.softmax(self.gate(x), dim=1, dtype=torch.float)
        weights, selected = torch.topk(weights, self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        final = torch.empty_like(x)
        final.zero_()
        tokens = torch.arange(x.shape[0])
        for i, expert in enumerate(self.experts):
            routed = ((selected == i).to(x.dtype) * weights).sum(dim=-1, keepdim=True)
            final.index_add_(0, tokens, expert(x) * routed)
        scratch = torch.empty_like(x)
        scratch.copy_(final)
        return scratch.view(b, s, h)


def get_inputs():
    return [torch.randn(2, 3, 16)]
