"""In-place writes that export functionalises: slice and select assignment, copy_ (into new memory of which a
view, taken before, is read after: only functionalisation is exact); and F.unfold (im2col)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, src, img):
        y = x.clone()
        y[:, 2:5] = src
        y[1] = 0.5
        z = torch.zeros_like(x)
        first = z[0]
        z.copy_(x[:1].expand_as(x))
        cols = F.unfold(img, kernel_size=3, padding=1, stride=2)
        return y, z * first, cols


def get_inputs():
    return [torch.randn(4, 8), torch.randn(4, 3), torch.randn(2, 3, 7, 7)]


def get_init_inputs():
    return []
