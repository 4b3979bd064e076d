"""Scaled dot-product attention: batch 1, 16 heads, 2048 tokens, head dim 64, fp32."""
import torch


class Model(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [torch.randn(1, 16, 2048, 64) for _ in range(3)]


def get_init_inputs():
    return []
