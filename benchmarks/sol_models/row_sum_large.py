"""Read-bound: row sums of a 256 MiB fp32 matrix (tests the DRAM read bandwidth)."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []
