"""Batched matmul: 64 x (512 x 512) @ (512 x 512), fp32."""
import torch


class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(64, 512, 512), torch.randn(64, 512, 512)]


def get_init_inputs():
    return []
