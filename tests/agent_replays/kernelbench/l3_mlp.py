"""KernelBench-convention problem (level 3): an MLP whose layer sizes come from
get_init_inputs (nn.Sequential of Linear and ReLU). Written for solar-io's agent tests."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size: int, layer_sizes: list, output_size: int):
        super().__init__()
        layers = []
        current = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(current, size))
            layers.append(nn.ReLU())
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


batch_size = 2
input_size = 12
layer_sizes = [16, 8]
output_size = 4


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
