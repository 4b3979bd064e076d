import torch
import torch.nn as nn


class Model(nn.Module):
    """addmm with alpha and beta."""

    def __init__(self):
        super().__init__()

    def forward(self, c, a, b):
        return torch.addmm(c, a, b, beta=0.5, alpha=2.0)


def get_inputs():
    return [torch.randn(16, 24), torch.randn(16, 40), torch.randn(40, 24)]


def get_init_inputs():
    return []
