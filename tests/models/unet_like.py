"""A small U-Net: two down stages, a bottleneck and two up stages with skip concatenation."""
import torch
import torch.nn as nn


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(2, cout), nn.SiLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.SiLU())


class Model(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.d1, self.d2 = block(3, c), block(c, 2 * c)
        self.mid = block(2 * c, 4 * c)
        self.u2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2)
        self.b2 = block(4 * c, 2 * c)
        self.u1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.b1 = block(2 * c, c)
        self.out = nn.Conv2d(c, 1, 1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        s1 = self.d1(x)
        s2 = self.d2(self.pool(s1))
        m = self.mid(self.pool(s2))
        y = self.b2(torch.cat([self.u2(m), s2], dim=1))
        y = self.b1(torch.cat([self.u1(y), s1], dim=1))
        return self.out(y)


def get_inputs():
    return [torch.randn(1, 3, 16, 16)]


def get_init_inputs():
    return [8]
