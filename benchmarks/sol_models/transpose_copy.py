"""Data movement: a materialised transpose of a 64 MiB fp32 matrix (read + write)."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x.t().contiguous()


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
