import torch
import torch.nn as nn


class Model(nn.Module):
    """gather, index_select and tensor indexing."""

    def __init__(self):
        super().__init__()

    def forward(self, x, idx):
        g = torch.gather(x, 1, idx)
        s = torch.index_select(x, 0, idx[0])
        return g, s, x[idx[:, 0]]


def get_inputs():
    return [torch.randn(6, 10), torch.randint(0, 6, (6, 3))]


def get_init_inputs():
    return []
