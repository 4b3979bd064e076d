"""A routed MoE's combine as Hugging Face writes it: the routing one-hot, and new memory scatter-added into
per expert (``zeros(..).index_add_``), lowered without functionalising the program."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, experts=4):
        super().__init__()
        self.experts = experts

    def forward(self, x, chosen):
        mask = F.one_hot(chosen, self.experts).permute(1, 0)  # expert x token
        out = torch.zeros_like(x)
        for e in range(self.experts):
            out.index_add_(0, torch.arange(x.shape[0]), x * mask[e].unsqueeze(1).to(x.dtype) * (e + 1))
        return out


def get_inputs():
    return [torch.randn(6, 8), torch.tensor([0, 3, 1, 3, 2, 0])]


def get_init_inputs():
    return []
