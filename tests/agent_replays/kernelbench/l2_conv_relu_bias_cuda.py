"""KernelBench-convention problem (level 2, a fused block written for a GPU): conv2d, ReLU and a
learned per-channel bias; the inputs are made with .cuda() and the bias on device="cuda".
Written for solar-io's agent tests (solar-io runs it on the CPU)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1, device="cuda") * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = torch.relu(x)
        return x + self.bias


batch_size = 2
in_channels = 3
out_channels = 4
kernel_size = 3
height = width = 6


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width).cuda()]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
