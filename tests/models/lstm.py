import torch
import torch.nn as nn


class Model(nn.Module):
    """Two-layer LSTM, batch first."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(12, 16, num_layers=2, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out, h, c


def get_inputs():
    return [torch.randn(3, 5, 12)]


def get_init_inputs():
    return []
