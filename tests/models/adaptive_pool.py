import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Adaptive average and max pooling, to sizes that divide the input and to sizes that do not."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (F.adaptive_avg_pool2d(x, (1, 1)), F.adaptive_avg_pool2d(x, 4), F.adaptive_max_pool2d(x, 2),
                F.adaptive_avg_pool2d(x, (3, 5)), F.adaptive_max_pool2d(x, (5, 3)), F.adaptive_avg_pool1d(x[:, 0], 3))


def get_inputs():
    return [torch.randn(2, 5, 8, 8)]


def get_init_inputs():
    return []
