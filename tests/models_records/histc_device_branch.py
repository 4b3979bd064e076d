"""The histc of deepseek_histc.py behind a device test, as CPU fallbacks are written: on the CPU the
ids are counted as floats, elsewhere as integers. The capture traces on the meta device, so its
graph counts integers; the validation runs eagerly on the CPU, where the float branch runs."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, hidden: int = 16, experts: int = 4, top_k: int = 2):
        super().__init__()
        self.experts, self.top_k = experts, top_k
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.up = nn.Linear(hidden, hidden)

    def forward(self, x):
        scores = self.gate(x).softmax(-1)
        _, ids = torch.topk(scores, self.top_k, dim=-1)
        ids = ids.flatten()
        if ids.device.type == "cpu":
            ids = ids.float()
        counts = torch.histc(ids, bins=self.experts, min=0, max=self.experts - 1)
        return self.up(x) * (counts.float() / ids.numel()).max()


def get_inputs():
    return [torch.randn(6, 16)]
