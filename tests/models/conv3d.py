import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv3d with stride (1, 2, 2)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 6, 3, stride=(1, 2, 2), padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(1, 3, 6, 10, 10)]


def get_init_inputs():
    return []
