"""What every builtin shares: the check of its tensor arguments and the node it records.

>>> [str(e) for e in plain(("B", "S"))]
['B', 'S']
"""

from __future__ import annotations

from ...affine import Access, AffineExpr
from ...graph import Node
from .ir import LoopIRError, Value


def plain(ranks) -> tuple[AffineExpr, ...]:
    """The identity index of ``ranks`` (``x[b, s]``)."""
    return tuple(AffineExpr(((r, 1),), 0) for r in ranks)


def check(x, what: str, site: str) -> Value:
    """``x`` when it is a :class:`Value`, else a LoopIRError naming ``what`` at ``site``."""
    if not isinstance(x, Value):
        raise LoopIRError(f"{site}: {what} must be a tensor (a model input or a kernel result), got {type(x).__name__}")
    return x


def record(tr, kind: str, op: str, inputs, out: Access, site: str, **kw) -> None:
    """Record the node ``loopir.<op>`` writing ``out`` on the tracer ``tr``."""
    tr.node(Node(name=out.tensor, kind=kind, op=f"loopir.{op}", inputs=tuple(inputs), outputs=(out,),
                 location=site, **kw))
