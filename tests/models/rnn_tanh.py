import torch
import torch.nn as nn


class Model(nn.Module):
    """Elman RNN with tanh and an initial state."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(6, 9, batch_first=True)

    def forward(self, x, h0):
        out, h = self.rnn(x, h0)
        return out


def get_inputs():
    return [torch.randn(2, 4, 6), torch.randn(1, 2, 9)]


def get_init_inputs():
    return []
