"""An RNN cell whose hidden state is a plain tensor attribute, moved to the input's device and then
replaced by the new state in forward, after an optional in-place copy of a given initial state (a
common benchmark pattern: the copy into a constant exports as aten.copy and the move as aten.to)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, inputs=6, hidden=8, out=4, batch=3):
        super().__init__()
        self.hidden = torch.randn((batch, hidden))
        self.i2h = nn.Linear(inputs + hidden, hidden)
        self.h2o = nn.Linear(hidden, out)

    def forward(self, x, initial_hidden=None):
        if initial_hidden is not None:
            self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
        return self.h2o(self.hidden)


def get_inputs():
    return [torch.randn(3, 6), torch.randn(3, 8)]


def get_init_inputs():
    return []
