"""Slices with steps, selects and a slice of a slice (cross-frontend twin of
tests/models/slice_select.py): views, so they move no bytes; the positions are literal,
so this program keeps the sizes of the model file."""

from solar_io.frontends.loopir import Dim, Out, Tensor, kernel, select, slice

B, D = Dim("B", 5), Dim("D", 9)


@kernel
def add1(x: Tensor("B,D"), y: Out("B,D")):
    for b in B:
        for d in D:
            y[b, d] = x[b, d] + 1.0


def model(x: Tensor("B,D")):
    inner = slice(slice(x, "B", 1, 5, as_dim="B4"), "D", 0, 4, as_dim="D4")
    return {"a": slice(x, "D", 1, 7, 2), "b": select(x, "B", 2), "c": select(x, "D", 8),
            "d": slice(x, "D", 2, 5), "e": add1(inner)}
