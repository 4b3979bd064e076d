import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Grouped-query attention (8 query heads, 2 KV heads)."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def get_inputs():
    return [torch.randn(1, 8, 12, 16), torch.randn(1, 2, 12, 16), torch.randn(1, 2, 12, 16)]


def get_init_inputs():
    return []
