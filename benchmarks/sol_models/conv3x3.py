"""A ResNet-stage 3x3 convolution: batch 8, 64 -> 64 channels, 56 x 56, fp32."""
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(8, 64, 56, 56)]


def get_init_inputs():
    return []
