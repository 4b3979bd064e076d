"""A row softmax for the measure/report tests."""
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []
