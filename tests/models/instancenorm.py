import torch
import torch.nn as nn


class Model(nn.Module):
    """InstanceNorm2d with affine."""

    def __init__(self):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(6, affine=True)

    def forward(self, x):
        return self.inorm(x)


def get_inputs():
    return [torch.randn(2, 6, 10, 10)]


def get_init_inputs():
    return []
