"""cat, stack, split and select (cross-frontend twin of tests/models/cat_stack_split.py);
the split points are literal, so this program keeps the sizes of the model file."""

from solar_io.frontends.loopir import Dim, Out, Tensor, concat, kernel, select, slice, stack

B, Da, Db = Dim("B", 4), Dim("Da", 5), Dim("Db", 7)


@kernel
def double(x: Tensor("B,Da"), y: Out("B,Da")):
    for b in B:
        for d in Da:
            y[b, d] = x[b, d] * 2.0


@kernel
def mul(x: Tensor("B,Da"), z: Tensor("B,Da"), y: Out("B,Da")):
    for b in B:
        for d in Da:
            y[b, d] = x[b, d] * z[b, d]


def model(a: Tensor("B,Da"), b: Tensor("B,Db")):
    c = concat([a, b], "Da", as_dim="Dc")
    s = stack([a, double(a)], "J")
    p, q = slice(c, "Dc", 0, 3), slice(c, "Dc", 3, 12)
    return {"c": c, "s": s, "pq": mul(p, slice(q, "Dc_9", 0, 3)), "u": slice(b, "B", 2, 4, as_dim="B2"),
            "v": select(a, "Da", 2)}
