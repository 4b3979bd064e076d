"""A bf16 MLP layer: linear, GELU (tanh), linear, all in bfloat16."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d=64, ff=128):
        super().__init__()
        self.fc1 = nn.Linear(d, ff).to(torch.bfloat16)
        self.fc2 = nn.Linear(ff, d).to(torch.bfloat16)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


def get_inputs():
    return [torch.randn(8, 64, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
