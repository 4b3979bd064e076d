import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """softplus with beta/threshold and mish."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softplus(x * 10, beta=2.0, threshold=15.0), F.mish(x)


def get_inputs():
    return [torch.randn(5, 60)]


def get_init_inputs():
    return []
