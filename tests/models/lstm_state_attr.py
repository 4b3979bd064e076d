"""LSTM whose initial states are plain tensor attributes moved to the input's device in forward
(a common benchmark pattern), followed by a linear head on the last step."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size=10, hidden=16, layers=2, out=5, batch=3):
        super().__init__()
        self.h0 = torch.randn((layers, batch, hidden))
        self.c0 = torch.randn((layers, batch, hidden))
        self.lstm = nn.LSTM(input_size, hidden, layers, batch_first=True)
        self.fc = nn.Linear(hidden, out)

    def forward(self, x):
        self.h0 = self.h0.to(x.device)
        self.c0 = self.c0.to(x.device)
        out, _ = self.lstm(x, (self.h0, self.c0))
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.randn(3, 4, 10)]


def get_init_inputs():
    return []
