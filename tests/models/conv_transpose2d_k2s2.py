import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed conv2d, kernel 2, stride 2 (U-Net upsampling), grouped."""

    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(8, 6, 2, stride=2, groups=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(1, 8, 6, 5)]


def get_init_inputs():
    return []
