"""Memory-bound: x + y over 64 Mi fp32 elements (256 MiB per tensor, far beyond any cache)."""
import torch


class Model(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def get_inputs():
    return [torch.randn(8192, 8192), torch.randn(8192, 8192)]


def get_init_inputs():
    return []
