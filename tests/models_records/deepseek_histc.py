"""Routing statistics in the pattern of a DeepSeek-V3-style MoE block: a sigmoid router with a
score-correction bias picks top-k experts, and the tokens each expert receives are counted with
``torch.histc`` on the integer expert ids (as a GPU kernel does; on the CPU histc has no kernel for
integers). The counts scale a load term added to the dense expert output."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, hidden: int = 16, experts: int = 4, top_k: int = 2):
        super().__init__()
        self.experts, self.top_k = experts, top_k
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.register_buffer("correction_bias", torch.linspace(-0.1, 0.1, experts))
        self.up = nn.Linear(hidden, hidden)

    def forward(self, x):
        scores = self.gate(x).sigmoid()
        _, ids = torch.topk(scores + self.correction_bias, self.top_k, dim=-1)
        weights = scores.gather(-1, ids)
        counts = torch.histc(ids.flatten(), bins=self.experts, min=0, max=self.experts - 1)
        load = (counts.float() / ids.numel()).max()
        return self.up(x) * weights.sum(-1, keepdim=True) * load


def get_inputs():
    return [torch.randn(6, 16)]
