"""Dropout in training mode (functional, in attention, inside nn.MultiheadAttention): captured as
inference, where dropout is the identity, and validated against the model run the same way."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.mha = nn.MultiheadAttention(8, 2, dropout=0.3, batch_first=True)

    def forward(self, x):
        y = F.dropout(self.fc(x), 0.5, training=self.training)
        z = F.scaled_dot_product_attention(y, y, y, dropout_p=0.2)
        return z + self.mha(y, y, y)[0] + torch.dropout(x, 0.1, True)


def get_inputs():
    return [torch.randn(2, 5, 8)]


def get_init_inputs():
    return []
