"""An LSTM over a short sequence: one step kernel pair per time step (Python recurrence).

The four gates are one tensor z[B, G, J] (G = 4: input, forget, cell, output); the cell
kernel reads them with constant indexes z[b, 0, j] .. z[b, 3, j].
"""

from solar_io.frontends.loopir import Dim, Out, Temp, Tensor, kernel, select, sigmoid, tanh

B = Dim("B", 8, parallel=True)
I = Dim("I", 32)  # noqa: E741
J = Dim("J", 64)
Jh = Dim("Jh", 64)
G = Dim("G", 4)
Tn = Dim("Tn", 3)


@kernel
def gates(x: Tensor("B,I"), h: Tensor("B,Jh"), wx: Tensor("I,G,J"), wh: Tensor("Jh,G,J"), bias: Tensor("G,J"),
          zx: Temp("B,G,J"), zh: Temp("B,G,J"), z: Out("B,G,J")):
    for b in B:
        for g in G:
            for j in J:
                for i in I:
                    zx[b, g, j] += x[b, i] * wx[i, g, j]
    for b in B:
        for g in G:
            for j in J:
                for k in Jh:
                    zh[b, g, j] += h[b, k] * wh[k, g, j]
    for b in B:
        for g in G:
            for j in J:
                z[b, g, j] = zx[b, g, j] + zh[b, g, j] + bias[g, j]


@kernel
def cell(z: Tensor("B,G,J"), c: Tensor("B,J"), c_new: Out("B,J"), h_new: Out("B,J")):
    for b in B:
        for j in J:
            c_new[b, j] = sigmoid(z[b, 1, j]) * c[b, j] + sigmoid(z[b, 0, j]) * tanh(z[b, 2, j])
            h_new[b, j] = sigmoid(z[b, 3, j]) * tanh(c_new[b, j])


def model(x: Tensor("Tn,B,I"), h0: Tensor("B,J"), c0: Tensor("B,J"), wx: Tensor("I,G,J", role="weight"),
          wh: Tensor("Jh,G,J", role="weight"), bias: Tensor("G,J", role="weight")):
    h, c = h0, c0
    for t in range(x.size_of("Tn")):
        c, h = cell(gates(select(x, "Tn", t), h, wx, wh, bias), c)
    return {"h": h, "c": c}
