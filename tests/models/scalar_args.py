"""Non-tensor inputs and outputs: a Python int and float in get_inputs, a tensor in
get_init_inputs, and an int returned next to the tensor result."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(w)

    def forward(self, x, dim, scale):
        return (x * scale).sum(dim) @ self.w, x.shape[0]


def get_inputs():
    return [torch.randn(4, 5, 6), 1, 0.5]


def get_init_inputs():
    return [torch.randn(6, 3)]
