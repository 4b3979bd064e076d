import torch
import torch.nn as nn


class Model(nn.Module):
    """Tensor.unfold, repeat, expand and repeat_interleave."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        w = x.unfold(1, 4, 2)
        r = x.repeat(2, 1)
        e = x[:, :1].expand(-1, 5)
        return w.sum(-1), r, e + 1, x.repeat_interleave(2, dim=1)


def get_inputs():
    return [torch.randn(3, 12)]


def get_init_inputs():
    return []
