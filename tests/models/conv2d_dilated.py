import torch
import torch.nn as nn


class Model(nn.Module):
    """Dilated conv without bias, asymmetric kernel."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, (3, 5), dilation=2, padding=(2, 1), bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(1, 4, 20, 18)]


def get_init_inputs():
    return []
