"""Compute-bound: one fp32 GEMM 2048^3 (tests the matrix peak)."""
import torch


class Model(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(2048, 2048), torch.randn(2048, 2048)]


def get_init_inputs():
    return []
