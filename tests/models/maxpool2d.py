import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """MaxPool2d 3x3 stride 2 padding 1, and with ceil_mode."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 2, 2, ceil_mode=True)


def get_inputs():
    return [torch.randn(2, 4, 15, 15)]


def get_init_inputs():
    return []
