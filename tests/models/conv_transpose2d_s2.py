import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed conv2d, kernel 4, stride 2, padding 1 (DCGAN)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 8, 7, 7)]


def get_init_inputs():
    return []
