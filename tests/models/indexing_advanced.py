"""Advanced indexing and einsum forms that decompose: x[i, j], x[:, i], diagonal, trace,
einsum with an ellipsis and with three operands, isnan/isinf/trunc/frac."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, c, x, i, j):
        y = x * 2.5
        return (torch.einsum("...ij,...jk->...ik", a, b), torch.einsum("ij,jk,kl->il", a[0, 0], b[0, 0], c),
                x[i, j], x[:, j], torch.diagonal(x, 1, 0, 1), torch.trace(c[:, :6]),
                torch.isnan(x) | torch.isinf(x), torch.trunc(y), torch.frac(y), torch.floor_divide(y, 0.7))


def get_inputs():
    return [torch.randn(2, 3, 4, 5), torch.randn(2, 3, 5, 6), torch.randn(6, 7), torch.randn(5, 6, 3),
            torch.randint(0, 5, (4,)), torch.randint(0, 6, (4,))]


def get_init_inputs():
    return []
