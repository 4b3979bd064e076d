import torch
import torch.nn as nn


class Model(nn.Module):
    """comparisons, logical ops, where and masked_fill."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        m = (x > y) & ~(x < 0)
        z = torch.where(m, x, y)
        return z.masked_fill(x == y, 0.0) + (x >= 0.5).float()


def get_inputs():
    return [torch.randn(6, 20), torch.randn(6, 20)]


def get_init_inputs():
    return []
