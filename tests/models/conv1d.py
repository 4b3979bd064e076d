import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv1d, stride 2, padding 1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 5, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 4, 33)]


def get_init_inputs():
    return []
