import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GELU (exact and tanh), SiLU, sigmoid, tanh."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x) + F.gelu(x, approximate='tanh') + F.silu(x) + torch.sigmoid(x) * torch.tanh(x)


def get_inputs():
    return [torch.randn(4, 128)]


def get_init_inputs():
    return []
