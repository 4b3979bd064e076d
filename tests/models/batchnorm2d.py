import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm2d in inference mode (running statistics), then ReLU."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(8)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
        self.bn.eval()

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(2, 8, 9, 9)]


def get_init_inputs():
    return []
