import torch
import torch.nn as nn


class Model(nn.Module):
    """Bias-free linear on a 3-d input."""

    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 2 * d, bias=False)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(2, 10, 32)]


def get_init_inputs():
    return [32]
