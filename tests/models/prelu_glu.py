import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """PReLU with per-channel weights and GLU."""

    def __init__(self):
        super().__init__()
        self.act = nn.PReLU(8)

    def forward(self, x):
        return self.act(x), F.glu(x, dim=1)


def get_inputs():
    return [torch.randn(2, 8, 6)]


def get_init_inputs():
    return []
