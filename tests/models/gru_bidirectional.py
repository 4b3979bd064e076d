import torch
import torch.nn as nn


class Model(nn.Module):
    """Bidirectional GRU, sequence first."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 10, bidirectional=True)

    def forward(self, x):
        out, h = self.gru(x)
        return out, h


def get_inputs():
    return [torch.randn(4, 2, 8)]


def get_init_inputs():
    return []
