import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Attention with a boolean mask and a float mask."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, m):
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        b = F.scaled_dot_product_attention(q, k, v, attn_mask=m.float() * -2.0)
        return a, b


def get_inputs():
    return [torch.randn(2, 3, 10, 8), torch.randn(2, 3, 12, 8), torch.randn(2, 3, 12, 6), torch.rand(10, 12) > 0.3]


def get_init_inputs():
    return []
