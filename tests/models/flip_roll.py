import torch
import torch.nn as nn


class Model(nn.Module):
    """flip and roll."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.flip(x, dims=[0, 2]), torch.roll(x, shifts=3, dims=2), torch.roll(x, shifts=(1, -1), dims=(0, 1))


def get_inputs():
    return [torch.randn(3, 4, 10)]


def get_init_inputs():
    return []
