"""Mamba-like block: input projection, causal depthwise conv1d, gated selective scan via cumsum."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d=32, inner=64, k=4):
        super().__init__()
        self.k = k
        self.in_proj = nn.Linear(d, 2 * inner)
        self.conv = nn.Conv1d(inner, inner, k, groups=inner, padding=k - 1)
        self.dt = nn.Linear(inner, inner)
        self.a_log = nn.Parameter(torch.randn(inner) * 0.1)
        self.out_proj = nn.Linear(inner, d)

    def forward(self, x):
        b, s, _ = x.shape
        u, z = self.in_proj(x).chunk(2, dim=-1)
        u = self.conv(u.transpose(1, 2))[..., :s].transpose(1, 2)
        u = F.silu(u)
        dt = F.softplus(self.dt(u))
        decay = torch.cumsum(-dt * torch.exp(self.a_log), dim=1)
        h = torch.exp(decay) * torch.cumsum(u * dt * torch.exp(-decay), dim=1)
        return self.out_proj(h * F.silu(z))


def get_inputs():
    return [torch.randn(2, 12, 32)]


def get_init_inputs():
    return []
