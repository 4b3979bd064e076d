"""ViT patch embedding: strided conv, flatten, class token, position embedding, LayerNorm."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, img=32, patch=8, d=48):
        super().__init__()
        self.proj = nn.Conv2d(3, d, patch, stride=patch)
        n = (img // patch) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, n + 1, d))
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        p = self.proj(x).flatten(2).transpose(1, 2)
        cls = self.cls.expand(x.shape[0], -1, -1)
        return self.norm(torch.cat([cls, p], dim=1) + self.pos)


def get_inputs():
    return [torch.randn(2, 3, 32, 32)]


def get_init_inputs():
    return []
