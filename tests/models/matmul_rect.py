import torch
import torch.nn as nn


class Model(nn.Module):
    """Rectangular matmul A[M,K] @ B[K,N]."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(32, 80), torch.randn(80, 24)]


def get_init_inputs():
    return []
