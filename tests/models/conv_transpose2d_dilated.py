"""Transposed conv2d with stride 2, dilation 2, asymmetric padding and output padding."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(6, 4, 3, stride=2, padding=(1, 2), dilation=2, output_padding=1, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 6, 5, 7)]


def get_init_inputs():
    return []
