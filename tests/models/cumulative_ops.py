"""Scans (format 1.1): cumsum, cumprod, running max/min values and logcumsumexp along different dims."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, p):
        s = torch.cumsum(x, dim=1)
        c = torch.cumprod(p, dim=-1)
        hi = torch.cummax(x, dim=2).values
        lo = torch.cummin(x, dim=0)[0]
        lse = torch.logcumsumexp(x, dim=1)
        return s + hi - lo, c, lse


def get_inputs():
    return [torch.randn(3, 10, 6), torch.rand(4, 8) + 0.5]


def get_init_inputs():
    return []
