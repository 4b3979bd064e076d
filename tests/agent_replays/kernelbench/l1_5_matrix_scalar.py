"""KernelBench-convention problem (level 1, elementwise): a matrix times a scalar that
get_inputs passes as a Python float (a constant, not a tensor input). Written for solar-io's
agent tests."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return A * s


M = 8
N = 12


def get_inputs():
    A = torch.randn(M, N)
    s = 3.14
    return [A, s]


def get_init_inputs():
    return []
