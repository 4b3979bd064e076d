"""KernelBench-convention problem (level 1, attention): scaled dot-product attention. Written
for solar-io's agent tests."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(Q, K, V)


batch_size = 2
num_heads = 2
seq_len = 8
head_dim = 4


def get_inputs():
    Q = torch.randn(batch_size, num_heads, seq_len, head_dim)
    K = torch.randn(batch_size, num_heads, seq_len, head_dim)
    V = torch.randn(batch_size, num_heads, seq_len, head_dim)
    return [Q, K, V]


def get_init_inputs():
    return []
