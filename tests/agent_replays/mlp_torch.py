"""A small PyTorch MLP (source for the agent frontend tests)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs(rng):
    return {"x": torch.from_numpy(rng.standard_normal((4, 16)).astype("float32"))}
