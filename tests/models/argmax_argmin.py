import torch
import torch.nn as nn


class Model(nn.Module):
    """argmax and argmin, with and without dim."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=2), torch.argmin(x, dim=1, keepdim=True), torch.argmax(x)


def get_inputs():
    return [torch.randn(2, 7, 13)]


def get_init_inputs():
    return []
