"""Multi-head attention written with einops (as Mamba2 and many research files are): rearrange
splits and merges heads through reshape and permute ops."""
import torch
import torch.nn as nn
from einops import rearrange


class Model(nn.Module):
    def __init__(self, d=16, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        q, k, v = rearrange(self.qkv(x), "b s (three h e) -> three b h s e", three=3, h=self.heads)
        att = torch.softmax(torch.einsum("bhse,bhte->bhst", q, k) / q.shape[-1] ** 0.5, dim=-1)
        return self.out(rearrange(torch.einsum("bhst,bhte->bhse", att, v), "b h s e -> b s (h e)"))


def get_inputs():
    return [torch.randn(2, 5, 16)]


def get_init_inputs():
    return []
