"""Matrix-vector and vector-matrix products (FlopCounterMode counts aten.mv as zero)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, v, u):
        return torch.matmul(x, v), torch.matmul(u, x[0])


def get_inputs():
    return [torch.randn(3, 8, 16), torch.randn(16), torch.randn(8)]


def get_init_inputs():
    return []
