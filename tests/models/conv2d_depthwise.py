import torch
import torch.nn as nn


class Model(nn.Module):
    """Depthwise-separable convolution."""

    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, groups=8, padding=1)
        self.pw = nn.Conv2d(8, 12, 1)

    def forward(self, x):
        return self.pw(self.dw(x))


def get_inputs():
    return [torch.randn(2, 8, 14, 14)]


def get_init_inputs():
    return []
