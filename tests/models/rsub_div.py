import torch
import torch.nn as nn


class Model(nn.Module):
    """rsub, div (true and floor), sub with alpha."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return 1.0 - x, x / (y.abs() + 1), torch.div(x * 10, 3, rounding_mode='floor'), torch.sub(x, y, alpha=2)


def get_inputs():
    return [torch.randn(5, 12), torch.randn(5, 12)]


def get_init_inputs():
    return []
