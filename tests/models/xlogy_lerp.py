import torch
import torch.nn as nn


class Model(nn.Module):
    """xlogy, lerp, addcmul."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        p = x.abs()
        return torch.xlogy(p, y.abs() + 0.1) + torch.lerp(x, y, 0.3) + torch.addcmul(x, x, y, value=0.5)


def get_inputs():
    return [torch.randn(4, 16), torch.randn(4, 16)]


def get_init_inputs():
    return []
