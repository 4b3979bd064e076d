"""A constant tensor made inside forward on the input's device (torch.tensor(v, device=x.device)):
the export on meta lifts it without a value, so validation reads it from an export on the CPU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, low=-0.25, high=0.5):
        super().__init__()
        self.low, self.high = low, high
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = torch.min(self.fc(x), torch.tensor(self.high, device=x.device))
        return torch.max(y, torch.tensor([self.low], device=x.device))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
