"""Output shapes of the recurrent ops (``aten.gru``, ``aten.lstm``, ``aten.rnn_*``) for ``torch.export``.

``torch.export`` keeps these ops whole (the lowering has rules for them), but to know their
outputs' shapes it runs their CompositeImplicitAutograd decomposition on fake tensors: every
cell of every time step, layer and direction, through Python. For KernelBench's bidirectional
GRU (6 layers, 512 steps) that is 6,144 cells and over a minute of tracing for three output
shapes. :func:`recurrent_shapes` gives fake-tensor mode those shapes directly while an export
runs; the traced program (one ``aten.gru.input`` node) is the same.

The shapes (torch's ``nn.RNNBase`` documentation): ``output`` is the input's shape with the
last dimension replaced by ``directions * hx[0].shape[-1]`` (the hidden, or the LSTM
projection, size); each final state has the shape of its initial state.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

_OPS = ("gru", "lstm", "rnn_tanh", "rnn_relu")


def _outputs(func: Any, x: torch.Tensor, args: tuple, kwargs: dict) -> tuple[torch.Tensor, ...]:
    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args, strict=False)) | kwargs
    hx = bound["hx"]
    states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
    dirs = 2 if bound["bidirectional"] else 1
    out_shape = tuple(x.shape[:-1]) + (dirs * states[0].shape[-1],)
    with x.fake_mode:  # type: ignore[attr-defined]
        out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
        finals = [torch.empty(tuple(s.shape), dtype=s.dtype, device=s.device) for s in states]
    return (out, *finals)


def _shapes_on_fakes(func: Any, original: Any) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        x = args[0] if args else kwargs.get("input")
        if isinstance(x, FakeTensor):
            return _outputs(func, x, args, kwargs)
        return original(*args, **kwargs)

    return kernel


@contextmanager
def recurrent_shapes() -> Iterator[None]:
    """Within: the recurrent ops give fake tensors their output shapes without running their cells.

    The ops' Python CompositeImplicitAutograd and Autograd kernels (torch's decompositions, which
    export's tracer runs on fake tensors) are wrapped: on fake tensors they return empty outputs of the
    right shapes; on any other tensors they run as before. Restored on exit.
    """
    keys = (torch._C.DispatchKey.CompositeImplicitAutograd, torch._C.DispatchKey.Autograd)
    saved = []
    for name in _OPS:
        op = getattr(torch.ops.aten, name).input
        for key in keys:
            original = op.py_kernels.get(key)
            if original is None or isinstance(original, torch._C.DispatchKey):
                continue
            saved.append((op, key, original))
            op.py_kernels[key] = _shapes_on_fakes(op, original)
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, key, original in saved:
            op.py_kernels[key] = original
            op._dispatch_cache.clear()
