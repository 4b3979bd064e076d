"""A recurrence's later time steps as instances of its second one (format 1.4 repeat blocks).

``rules/rnn.py`` lowers the first step (it reads the initial state) and the second normally; every
step after that is the second with its step number changed. Tensors of step ``t`` are named
``{prefix}.t{t}.*`` (and its input slice ``{prefix}.x{t}``), so the second step's nodes become a
template by renaming: its own names get the slot ``{t}``, the names of the step before it
``{t-1}`` (``{t+1}`` for a reverse direction), and the one index that reads the step's slice of the
input projection gets the term ``t``. :func:`solar_io.frontends.common.repeat_build.replicate`
emits the instances. Anything that does not fit this pattern (a tensor of the step without the
step's prefix, a name taken) leaves the steps to the normal lowering.
"""

from __future__ import annotations

from dataclasses import replace

from ...affine import Access, AffineExpr
from ...graph import Tensor
from ..common.repeat_build import replicate
from .ctx import LowerCtx


def _renamer(prefix: str, t1: int, t0: int, prev: str):  # noqa: ANN202
    own, before, xs = f"{prefix}.t{t1}.", f"{prefix}.t{t0}.", f"{prefix}.x{t1}"

    def rename(name: str) -> str:
        if name == xs:
            return f"{prefix}.x{{t}}"
        if name.startswith(own):
            return f"{prefix}.t{{t}}." + name[len(own):]
        if name.startswith(before):
            return f"{prefix}.t{{{prev}}}." + name[len(before):]
        return name

    return rename


def _access(a: Access, rename: object) -> Access:
    return Access(rename(a.tensor), a.index)  # type: ignore[operator]


def repeat_steps(ctx: LowerCtx, prefix: str, order: list[int], mark: tuple[int, int], tdim: int,
                 state: list[str]) -> list[str] | None:
    """Emit steps ``order[2:]`` as instances of step ``order[1]`` (its nodes and tensors from ``mark``,
    the builder's node and tensor counts before it); the templates of the state names (``state``:
    step ``order[1]``'s), or None when the step does not fit the pattern (nothing emitted)."""
    b = ctx.b
    t1, t0, direction = order[1], order[0], order[1] - order[0]
    rename = _renamer(prefix, t1, t0, "t-1" if direction > 0 else "t+1")
    infos = list(b.tensors.values())[mark[1]:]
    tensors = []
    for info in infos:
        name = rename(info.name)
        if name == info.name or info.ranks is None:
            return None
        tensors.append(Tensor(name, info.ranks, info.dtype, info.role, info.density, info.value, info.generated))
    xs = f"{prefix}.x{t1}"
    nodes = []
    for n in b.nodes[mark[0]:]:
        inputs = tuple(_access(a, rename) for a in n.inputs)
        if n.outputs[0].tensor == xs:  # the step's slice of the input projection: index t1 at tdim
            a = inputs[0]
            e = a.index[tdim] if a.index is not None else None
            if not isinstance(e, AffineExpr) or e.terms or e.const != t1:
                return None
            index = list(a.index)  # type: ignore[arg-type]
            index[tdim] = AffineExpr((("t", 1),), 0)
            inputs = (Access(a.tensor, tuple(index)),) + inputs[1:]
        node = replace(n, name=rename(n.name), inputs=inputs, outputs=tuple(_access(a, rename) for a in n.outputs))
        if node.name == n.name:
            return None
        nodes.append(node)
    count = len(order) - 2
    if not replicate(b, "t", order[2], direction, count, nodes, tensors):
        return None
    for info in infos:  # views of the template step that are not contiguous: so are their instances
        if info.name in ctx.noncontig:
            template = rename(info.name)
            ctx.noncontig.update(template.replace("{t}", str(u)) for u in order[2:])
    return [rename(s) for s in state]


def repeat_outputs(ctx: LowerCtx, prefix: str, steps: int) -> list[str] | None:
    """Emit the per-step output reshapes of steps 2.. as instances of step 1's (the last two nodes
    lowered); their tensor names, or None when those nodes are not that reshape."""
    b = ctx.b
    if len(b.nodes) < 2:
        return None
    node = b.nodes[-1]
    out, src = f"{prefix}.o1", f"{prefix}.t1."
    if node.name != out or node.movement != "reshape" or not node.inputs[0].tensor.startswith(src):
        return None
    h = f"{prefix}.t{{t}}." + node.inputs[0].tensor[len(src):]
    info = b.tensors[out]
    template = replace(node, name=f"{prefix}.o{{t}}", inputs=(Access(h, node.inputs[0].index),),
                       outputs=(Access(f"{prefix}.o{{t}}", node.outputs[0].index),))
    tensor = Tensor(f"{prefix}.o{{t}}", info.ranks, info.dtype, info.role)
    if out in ctx.noncontig or not replicate(b, "t", 2, 1, steps - 2, [template], [tensor]):
        return None
    return [f"{prefix}.o{u}" for u in range(2, steps)]


__all__ = ["repeat_outputs", "repeat_steps"]
