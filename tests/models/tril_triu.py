import torch
import torch.nn as nn


class Model(nn.Module):
    """tril and triu with diagonals."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tril(x), torch.triu(x, diagonal=1), torch.tril(x, -2)


def get_inputs():
    return [torch.randn(2, 7, 9)]


def get_init_inputs():
    return []
