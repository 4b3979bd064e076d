"""LeNet-5 style CNN classifier with average pooling and tanh."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.Tanh(), nn.AvgPool2d(2),
                                      nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.Tanh(), nn.Linear(120, 84),
                                  nn.Tanh(), nn.Linear(84, classes))

    def forward(self, x):
        return self.head(self.features(x))


def get_inputs():
    return [torch.randn(4, 1, 28, 28)]


def get_init_inputs():
    return [10]
