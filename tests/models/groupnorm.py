import torch
import torch.nn as nn


class Model(nn.Module):
    """GroupNorm, 4 groups."""

    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(4, 16)

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn(2, 16, 5, 5)]


def get_init_inputs():
    return []
