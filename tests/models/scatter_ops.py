"""Scatters (format 1.1): scatter_add, scatter_reduce, index_add, index_put with accumulate, index_copy, scatter."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, bins=7):
        super().__init__()
        self.bins = bins

    def forward(self, x, ids, vals):
        hist = torch.zeros(self.bins, x.shape[1]).scatter_add(0, ids.unsqueeze(1).expand(-1, x.shape[1]), x)
        acc = torch.zeros(self.bins, x.shape[1]).index_add(0, ids, x, alpha=0.5)
        put = torch.zeros(self.bins).index_put((ids,), vals, accumulate=True)
        order = torch.arange(x.shape[0]).flip(0)  # a permutation: overwrites are well defined
        moved = torch.zeros_like(x).index_copy(0, order, x)
        rows = x.clone()
        rows[order[:3]] = vals[:3].unsqueeze(1)
        spread = torch.zeros(x.shape[0], 16).scatter(1, order.unsqueeze(1), 1.0)
        peak = torch.full((self.bins, x.shape[1]), -1.0).scatter_reduce(
            0, ids.unsqueeze(1).expand(-1, x.shape[1]), x, "amax")
        return hist + acc, put, moved + rows, spread, peak


def get_inputs():
    return [torch.randn(12, 5), torch.randint(0, 7, (12,)), torch.randn(12)]


def get_init_inputs():
    return []
