"""KernelBench-convention problem (level 1, reduction): softmax over the last dim. Written for
solar-io's agent tests; make_inputs is another input function (--inputs-from)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 4
dim = 32


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def make_inputs():
    return [torch.rand(batch_size, dim) * 10]


def get_init_inputs():
    return []
