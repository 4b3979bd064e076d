"""Views and permutes (cross-frontend twin of tests/models/view_permute.py): reshapes are
views, a transpose that is consumed is materialised, as the torch frontend does."""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel, reshape, transpose

B, S, F, H, E, G = Dim("B", 2), Dim("S", 8), Dim("F", 64), Dim("H", 4), Dim("E", 16), Dim("G", 128)


@kernel
def double(x: Tensor("B,G"), y: Out("B,G")):
    for b in B:
        for g in G:
            y[b, g] = x[b, g] * 2.0


def model(x: Tensor("B,S,F")):
    y = reshape(x, "B,S,H,E")
    z = reshape(transpose(y, "B,H,E,S"), "B,G")
    return {"z": double(z), "y": transpose(y, "B,H,S,E")}
