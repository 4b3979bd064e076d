import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed conv1d, stride 1, padding 1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose1d(4, 6, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 4, 15)]


def get_init_inputs():
    return []
