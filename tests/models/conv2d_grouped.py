import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped convolution (4 groups)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, groups=4, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 8, 12, 12)]


def get_init_inputs():
    return []
