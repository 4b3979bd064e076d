import torch
import torch.nn as nn


class Model(nn.Module):
    """baddbmm with a broadcast bias."""

    def __init__(self):
        super().__init__()

    def forward(self, c, a, b):
        return torch.baddbmm(c, a, b)


def get_inputs():
    return [torch.randn(1, 12, 10), torch.randn(3, 12, 20), torch.randn(3, 20, 10)]


def get_init_inputs():
    return []
