import torch
import torch.nn as nn


class Model(nn.Module):
    """4-d activations times a 2-d weight (broadcast batch dims)."""

    def __init__(self):
        super().__init__()

    def forward(self, x, w):
        return torch.matmul(x, w)


def get_inputs():
    return [torch.randn(2, 3, 8, 16), torch.randn(16, 12)]


def get_init_inputs():
    return []
