"""KernelBench-convention problem (level 3, an RNN cell): one step of a vanilla RNN, the hidden
state from tanh of a linear layer over [input, hidden], the output from a second linear layer.
Written for solar-io's agent tests (the hidden state is an input here, not a random attribute)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x: torch.Tensor, hidden: torch.Tensor):
        combined = torch.cat((x, hidden), dim=1)
        hidden = self.tanh(self.i2h(combined))
        output = self.h2o(hidden)
        return output, hidden


batch_size = 4
input_size = 8
hidden_size = 16
output_size = 6


def get_inputs():
    return [torch.randn(batch_size, input_size), torch.randn(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
