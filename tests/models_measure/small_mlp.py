"""A small MLP with a GELU for the measure/report tests."""
import torch


class Model(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up = torch.nn.Linear(d, 4 * d)
        self.down = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return [128]
