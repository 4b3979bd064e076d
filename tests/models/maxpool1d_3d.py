import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """MaxPool1d with dilation and MaxPool3d."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return F.max_pool1d(x, 3, stride=1, dilation=2), F.max_pool3d(y, 2)


def get_inputs():
    return [torch.randn(2, 3, 20), torch.randn(1, 2, 6, 8, 8)]


def get_init_inputs():
    return []
