import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d 3x3 stride 2 padding 1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 3, 17, 17)]


def get_init_inputs():
    return []
