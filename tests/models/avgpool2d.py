import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """AvgPool2d with padding, count_include_pad False and True."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 2)


def get_inputs():
    return [torch.randn(2, 3, 11, 11)]


def get_init_inputs():
    return []
