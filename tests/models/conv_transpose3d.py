import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed conv3d, stride 2, output_padding 1."""

    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose3d(4, 3, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(1, 4, 3, 4, 5)]


def get_init_inputs():
    return []
