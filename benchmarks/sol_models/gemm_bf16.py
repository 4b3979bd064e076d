"""Compute-bound: one bf16 GEMM 2048^3 (tests the bf16 matrix peak)."""
import torch


class Model(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(2048, 2048, dtype=torch.bfloat16), torch.randn(2048, 2048, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
