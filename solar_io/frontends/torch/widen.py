"""A model and its graph run in float64: the rerun that tells rounding from a wrong lowering.

Validation compares the graph on the reference executor with eager PyTorch. Where the model
amplifies rounding (attention logits of 10^4 from unscaled random weights turn a softmax into a
near one-hot whose entries move by the logits' last bits), the float32 or bfloat16 outputs differ
by more than any tolerance tied to their dtype, although both compute the same function. Run both
in float64 and that difference shrinks with the unit roundoff (2^-53 against 2^-24 for float32 and
2^-8 for bfloat16), while a lowering that computes something else still differs as much as before.

The model alone cannot be widened with ``.double()``: reference code pins its own precision
(``x.to(torch.float32)``, ``softmax(..., dtype=torch.float32)``, ``torch.zeros(..., dtype=x.dtype)``
of a bf16 input), which a float64 model runs in float32 again. :class:`Float64Mode` rewrites every
floating dtype argument of every ATen call to float64 (and makes float64 the default dtype), so the
whole program runs in float64; :func:`widened_graph` reads the same tensors of the graph as fp64.

>>> import torch
>>> with Float64Mode():
...     y = torch.softmax(torch.ones(2, dtype=torch.float64), 0, dtype=torch.float32)
>>> y.dtype
torch.float64
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from ..common.validation import widened_graph

#: Floating dtypes whose every value float64 holds exactly: the widened run starts from the same inputs.
NARROW = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _wide(v: Any) -> Any:
    return torch.float64 if isinstance(v, torch.dtype) and v in NARROW else v


class Float64Mode(TorchDispatchMode):
    """Every ATen call with its float32 / bfloat16 / float16 dtype arguments as float64, and float64
    the default dtype (factories called without a dtype); tensors are widened by the caller."""

    def __enter__(self) -> Float64Mode:
        self._default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        torch.set_default_dtype(self._default)
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        args, kwargs = tree_map(_wide, (args, kwargs or {}))
        return func(*args, **kwargs)


def widened(x: Any) -> Any:
    """``x`` as float64 when it is a tensor of a narrow floating dtype (``NARROW``), else unchanged."""
    return x.double() if isinstance(x, torch.Tensor) and x.dtype in NARROW else x


__all__ = ["NARROW", "Float64Mode", "widened", "widened_graph"]
