"""MobileNetV2 inverted residual: expand 1x1, depthwise 3x3 with ReLU6, project 1x1, residual."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c=16, expand=4):
        super().__init__()
        h = c * expand
        self.body = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
                                  nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
                                  nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.body(x)


def get_inputs():
    return [torch.randn(2, 16, 10, 10)]


def get_init_inputs():
    return []
