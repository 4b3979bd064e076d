"""Ops with no kernel on the validation device: run wider there, and say so.

The capture traces on ``meta`` tensors, where an op such as ``aten.histc`` on an integer tensor
has a (shape-only) kernel; validation runs on the CPU, where it may not ("histogram_cpu" not
implemented for 'Long'), although the program runs on the accelerator it was written for. That
is a limit of the validation device, not a failure of the program, so it must neither refuse the
capture nor be recorded as a skip of the whole check.

``KernelFallback`` is a dispatch mode that runs every ATen op as is; an op that raises
``NotImplementedError`` (the error PyTorch gives for a dtype or backend its kernel does not
dispatch) is run again with its integer and narrow floating tensors widened to float64 (integers
exactly up to 2**53, fp16/bf16/fp8 values exactly) and its results cast back to the dtypes its meta
kernel gives. The value is therefore the op's value computed in higher precision on the CPU, not
the value of the accelerator's kernel (which may bin, round or order differently): the nodes it
feeds are checked against it, but the op itself is not checked, and ``unchecked`` records each
such node with the reason. An op that still cannot run (no CPU kernel at any dtype, or one that
writes its arguments) is left raising and named in ``missing``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from ...graph import Graph, Unchecked

#: dtypes widened to float64 for a second try: integers and floats narrower than fp64.
_WIDENED = frozenset({torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.float16, torch.bfloat16,
                      torch.float32, *(getattr(torch, n) for n in dir(torch) if n.startswith("float8_"))})


def op_packet(func: Any) -> str:
    """``aten.histc`` for ``torch.ops.aten.histc.default`` (the ``op`` a graph node carries)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return str(func)
    return f"{getattr(func, 'namespace', 'aten')}.{schema.name.split('::')[-1]}"


def first_line(e: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message, at most ``limit`` characters."""
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:limit]


def run_widened(func: Any, args: tuple, kwargs: dict) -> Any | None:
    """``func`` on ``args`` with integer and narrow floating tensors as float64, its results cast
    to the dtypes of its meta kernel; None when it does not apply or does not run."""
    schema = getattr(func, "_schema", None)
    if schema is None or schema.is_mutable:  # a widened copy would take the write, not the argument
        return None

    def meta(x: Any) -> Any:
        return torch.empty_like(x, device="meta") if isinstance(x, torch.Tensor) else x

    def wide(x: Any) -> Any:
        return x.double() if isinstance(x, torch.Tensor) and x.dtype in _WIDENED else x

    try:
        margs, mkwargs = tree_map(meta, (args, kwargs))
        want = func(*margs, **mkwargs)
        wargs, wkwargs = tree_map(wide, (args, kwargs))
        got = func(*wargs, **wkwargs)
    except Exception:
        return None
    flat_got, spec = tree_flatten(got)
    flat_want, _ = tree_flatten(want)
    if len(flat_got) != len(flat_want):
        return None
    out = [g.to(w.dtype) if isinstance(g, torch.Tensor) and isinstance(w, torch.Tensor) else g
           for g, w in zip(flat_got, flat_want, strict=True)]
    return tree_unflatten(out, spec)


class KernelFallback(TorchDispatchMode):
    """Runs ATen ops; one without a kernel for its dtypes here is run widened (module docstring).

    ``widened`` maps each op run widened to the error it first raised; ``missing`` is (op, error)
    of an op that could not be run at all (the run then raises)."""

    def __init__(self) -> None:
        super().__init__()
        self.widened: dict[str, str] = {}
        self.missing: tuple[str, str] | None = None

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        try:
            return func(*args, **kwargs)
        except NotImplementedError as e:
            out = run_widened(func, args, kwargs)
            if out is None:
                self.missing = (op_packet(func), first_line(e))
                raise
            self.widened.setdefault(op_packet(func), first_line(e))
            return out


class FallbackOpaque:
    """An opaque node's executor function run under ``KernelFallback``: when its op has no CPU
    kernel for its dtypes, the node's value is the widened run's, and the node is logged."""

    def __init__(self, impl: Any, node: str, log: dict[str, str]):
        self.impl, self.node, self.log = impl, node, log

    def __call__(self, *arrays: Any) -> Any:
        mode = KernelFallback()
        with mode:
            out = self.impl(*arrays)
        for err in mode.widened.values():
            self.log.setdefault(self.node, err)
        return out


def tolerant_opaque(fns: dict[str, Any]) -> dict[str, str]:
    """Wrap every opaque function of ``fns`` (in place) in ``FallbackOpaque``; returns the log they
    fill: {node name: the error its op raised on the CPU}."""
    log: dict[str, str] = {}
    for name, fn in list(fns.items()):
        if not isinstance(fn, FallbackOpaque):
            fns[name] = FallbackOpaque(fn, name, log)
    return log


WIDE_NOTE = ("no kernel on the cpu for its dtypes ({err}); its value in the check is the op run on the cpu with its "
             "integer and narrow floating inputs as float64 and cast back, not the value of the device the program "
             "was written for")


def unchecked_nodes(g: Graph, opaque_log: dict[str, str], eager_widened: dict[str, str]) -> tuple[
        tuple[Unchecked, ...], list[str]]:
    """The record's unchecked nodes: the opaque nodes whose op the executor ran widened, and the
    lowered nodes of an op the eager run ran widened; plus the widened eager ops no graph node carries
    (a composite op traced whole, run as its parts), to be named in the reason."""
    out: list[Unchecked] = []
    seen: set[str] = set()
    for n in g.nodes:
        if n.name in opaque_log:
            out.append(Unchecked(n.name, n.op, WIDE_NOTE.format(err=opaque_log[n.name])))
        elif n.op in eager_widened:
            out.append(Unchecked(n.name, n.op, WIDE_NOTE.format(err=eager_widened[n.op])))
        else:
            continue
        seen.add(n.op)
    others = [f"{op} ({err})" for op, err in eager_widened.items() if op not in seen]
    return tuple(out), others
