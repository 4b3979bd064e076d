import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """AvgPool3d."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.avg_pool3d(x, 2, stride=2)


def get_inputs():
    return [torch.randn(1, 2, 6, 6, 6)]


def get_init_inputs():
    return []
