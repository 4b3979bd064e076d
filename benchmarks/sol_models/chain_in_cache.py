"""An elementwise chain on a 4 MiB tensor: every intermediate fits in the last-level cache
(a CPU can keep them on chip between ops; tests the byte model of the unfused bound)."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        y = y * 2.0
        y = y + 1.0
        return y * y


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
