"""KernelBench-convention problem (level 1, normalisation): LayerNorm over the last dim.
Written for solar-io's agent tests."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 4
seq = 8
features = 16


def get_inputs():
    return [torch.randn(batch_size, seq, features)]


def get_init_inputs():
    return [(features,)]
