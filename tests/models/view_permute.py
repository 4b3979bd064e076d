import torch
import torch.nn as nn


class Model(nn.Module):
    """view, permute, transpose, reshape and flatten."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x.view(2, 8, 4, 16).permute(0, 2, 1, 3)
        z = y.transpose(2, 3).reshape(2, 4, -1)
        return torch.flatten(z, 1) * 2, y.contiguous()


def get_inputs():
    return [torch.randn(2, 8, 64)]


def get_init_inputs():
    return []
