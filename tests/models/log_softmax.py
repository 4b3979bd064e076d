import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """log_softmax."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(16, 100)]


def get_init_inputs():
    return []
