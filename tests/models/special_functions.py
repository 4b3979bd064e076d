"""Special functions (format 1.1 map operators): trigonometric, hyperbolic, error functions, remainders."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        u = torch.tanh(x) * 0.9
        trig = torch.atan(x) + torch.asin(u) + torch.acos(u) + torch.tan(u) + torch.atan2(x, y)
        hyp = torch.sinh(u) + torch.cosh(u) + torch.asinh(x) + torch.atanh(u) + torch.acosh(y.abs() + 1.5)
        err = torch.erfc(x) + torch.erfinv(u) + torch.log1p(y.abs()) + torch.expm1(u)
        rem = torch.fmod(x * 4, 1.5) + torch.remainder(x * 4, y.abs() + 0.5) + torch.trunc(x * 3) + torch.frac(x)
        return trig, hyp, err, rem


def get_inputs():
    return [torch.randn(6, 9), torch.randn(6, 9)]


def get_init_inputs():
    return []
