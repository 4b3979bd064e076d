import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """torch.norm, linalg.vector_norm (p=1, inf) and F.normalize."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (torch.norm(x, dim=1), torch.linalg.vector_norm(x, ord=1, dim=-1),
                torch.linalg.vector_norm(x, ord=float('inf')), F.normalize(x, dim=1))


def get_inputs():
    return [torch.randn(8, 24)]


def get_init_inputs():
    return []
