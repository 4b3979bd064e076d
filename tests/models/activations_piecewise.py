import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """leaky_relu, hardtanh, relu6, threshold."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.leaky_relu(x, 0.1), F.hardtanh(x, -0.5, 0.5), F.relu6(x * 4), F.threshold(x, 0.2, -1.0)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
