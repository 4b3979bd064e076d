"""VAE with the reparameterisation trick: the noise (randn_like) is an opaque node, and validation
replays the values the eager run drew."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d=32, z=8):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 2 * z))
        self.dec = nn.Sequential(nn.Linear(z, 64), nn.ReLU(), nn.Linear(64, d), nn.Sigmoid())

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return self.dec(z), kl


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
