"""Three-layer MLP with GELU and dropout (inactive at inference)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in, hidden, d_out):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Dropout(0.1),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, d_out))

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return [64, 256, 10]
