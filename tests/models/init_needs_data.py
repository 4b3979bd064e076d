"""A model whose __init__ reads tensor values (.item(), data-dependent sizes): it cannot be built
on the meta device, so capture builds it on the CPU and moves it to meta."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        counts = torch.tensor([3, 5])
        width = int(counts.sum().item())
        self.fc = nn.Linear(width, 4)
        self.scale = float(torch.tensor(0.5).item())

    def forward(self, x):
        return self.fc(x) * self.scale


def get_inputs():
    return [torch.randn(6, 8)]


def get_init_inputs():
    return []
