import torch
import torch.nn as nn


class Model(nn.Module):
    """slicing with steps, select and narrow."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x[:, 1:7:2], x[2], x[..., -1], torch.narrow(x, 1, 2, 3), x[1:, :4] + 1


def get_inputs():
    return [torch.randn(5, 9)]


def get_init_inputs():
    return []
