import torch
import torch.nn as nn


class Model(nn.Module):
    """cat, stack, split, chunk and unbind."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        c = torch.cat([a, b], dim=1)
        s = torch.stack([a, a * 2], dim=0)
        p, q = torch.split(c, [3, 9], dim=1)
        u = torch.chunk(b, 2, dim=0)
        v = torch.unbind(a, dim=1)
        return c, s, p * q[:, :3], u[1], v[2]


def get_inputs():
    return [torch.randn(4, 5), torch.randn(4, 7)]


def get_init_inputs():
    return []
