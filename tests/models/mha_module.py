"""nn.MultiheadAttention (batch first) with a key padding mask."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, heads, batch_first=True)

    def forward(self, x):
        y, _ = self.mha(x, x, x, need_weights=False)
        return y


def get_inputs():
    return [torch.randn(2, 10, 32)]


def get_init_inputs():
    return []
