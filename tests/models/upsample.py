"""Nearest, nearest-exact, linear, bilinear and trilinear upsampling (scale factors and sizes)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, img, seq, vol):
        return (F.interpolate(img, scale_factor=2, mode="nearest"),
                F.interpolate(img, size=(5, 7), mode="nearest"),
                F.interpolate(img, scale_factor=1.5, mode="nearest-exact"),
                F.interpolate(img, scale_factor=2, mode="bilinear"),
                F.interpolate(img, size=(5, 4), mode="bilinear", align_corners=True),
                F.interpolate(seq, scale_factor=3, mode="nearest"),
                F.interpolate(seq, size=7, mode="nearest-exact"),
                F.interpolate(seq, scale_factor=2, mode="linear"),
                F.interpolate(vol, scale_factor=2, mode="nearest"),
                F.interpolate(vol, size=(3, 4, 4), mode="nearest-exact"),
                F.interpolate(vol, scale_factor=2, mode="trilinear"))


def get_inputs():
    return [torch.randn(1, 2, 3, 3), torch.randn(2, 3, 4), torch.randn(1, 2, 2, 3, 3)]


def get_init_inputs():
    return []
