import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm1d on [N, C] features."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(32)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
