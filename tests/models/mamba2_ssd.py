"""Mamba-2 style structured state-space duality (SSD) chunk computation: segment sums with
cumsum and a tril mask, exp, and multi-operand einsums over chunks."""
import torch
import torch.nn as nn


def segsum(x):
    t = x.size(-1)
    x_cumsum = torch.cumsum(x, dim=-1)
    seg = x_cumsum[..., :, None] - x_cumsum[..., None, :]
    mask = torch.tril(torch.ones(t, t, dtype=torch.bool), diagonal=0)
    return seg.masked_fill(~mask, -torch.inf)


class Model(nn.Module):
    def __init__(self, batch=2, seq=16, heads=2, d_head=4, d_state=3, block=4):
        super().__init__()
        self.block = block
        self.A = nn.Parameter(torch.randn(batch, seq, heads) * 0.1)
        self.B = nn.Parameter(torch.randn(batch, seq, heads, d_state))
        self.C = nn.Parameter(torch.randn(batch, seq, heads, d_state))

    def forward(self, x):
        b, s, h, p = x.shape
        c = s // self.block
        xb = x.reshape(b, c, self.block, h, p)
        A = self.A.reshape(b, c, self.block, h).permute(0, 3, 1, 2)
        B = self.B.reshape(b, c, self.block, h, -1)
        C = self.C.reshape(b, c, self.block, h, -1)
        A_cumsum = torch.cumsum(A, dim=-1)
        L = torch.exp(segsum(A))
        y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, xb)
        decay = torch.exp(A_cumsum[:, :, :, -1:] - A_cumsum)
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay, xb)
        return y_diag, states


def get_inputs():
    return [torch.randn(2, 16, 2, 4)]


def get_init_inputs():
    return []
