"""Affine index expressions and tensor accesses.

An access names a tensor and gives one index expression per tensor dimension, written
``x[N, C, 2*P + R - 1, 2*Q + S - 1]``. Each expression is an integer-affine function of the
node's iteration ranks (``AffineExpr``), or ``@t`` (``Indirect``): the value read from input
tensor ``t`` of the same node at the same iteration point (gather / embedding lookup).
A bare name without brackets (``x``) accesses the whole tensor, used by node kinds that
have no iteration space (reshape, concat, opaque).

Expressions are canonical: terms sorted by rank name, coefficient 1 omitted, the constant
last, so ``R + 2*P - 1`` and ``2*P + R - 1`` parse to the same value and print the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

NAME_RE = r"[A-Za-z_][A-Za-z0-9_]*"
_NAME = re.compile(NAME_RE + r"\Z", re.ASCII)
_TENSOR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/\-]*\Z", re.ASCII)
_TERM = re.compile(r"\s*([+-])?\s*(?:(\d+)\s*\*\s*(" + NAME_RE + r")|(" + NAME_RE + r")\s*\*\s*(\d+)|(\d+)|("
                   + NAME_RE + r"))\s*", re.ASCII)


def is_rank_name(s: str) -> bool:
    """True when ``s`` is a valid rank name (an identifier)."""
    return bool(_NAME.match(s))


def is_tensor_name(s: str) -> bool:
    """True when ``s`` is a valid tensor or node name."""
    return bool(_TENSOR_NAME.match(s))


@dataclass(frozen=True, slots=True)
class AffineExpr:
    """``sum(coeff * rank) + const`` with integer coefficients; terms sorted by rank."""

    terms: tuple[tuple[str, int], ...]
    const: int = 0
    ranks: tuple[str, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ranks", tuple(r for r, _ in self.terms))

    def is_rank(self) -> bool:
        """True for a plain rank (``P``): one term, coefficient 1, no constant."""
        return len(self.terms) == 1 and self.terms[0][1] == 1 and self.const == 0

    def bounds(self, sizes: dict[str, int]) -> tuple[int, int]:
        """Smallest and largest value over the box ``0 <= rank < sizes[rank]``."""
        lo = hi = self.const
        for r, c in self.terms:
            span = c * (sizes[r] - 1)
            if span >= 0:
                hi += span
            else:
                lo += span
        return lo, hi

    def __str__(self) -> str:
        parts: list[str] = []
        for r, c in self.terms:
            mag = abs(c)
            body = r if mag == 1 else f"{mag}*{r}"
            if not parts:
                parts.append(body if c > 0 else f"-{body}")
            else:
                parts.append(f"+ {body}" if c > 0 else f"- {body}")
        if self.const or not parts:
            if not parts:
                parts.append(str(self.const))
            else:
                parts.append(f"+ {self.const}" if self.const > 0 else f"- {-self.const}")
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Indirect:
    """An index read from input tensor ``tensor`` of the same node (``@tensor``)."""

    tensor: str
    ranks: tuple[str, ...] = field(default=(), init=False, compare=False, repr=False)

    def __str__(self) -> str:
        return f"@{self.tensor}"


Index = AffineExpr | Indirect


@dataclass(frozen=True, slots=True)
class Access:
    """A tensor read or written by a node; ``index`` is None for whole-tensor accesses."""

    tensor: str
    index: tuple[Index, ...] | None = None

    def __str__(self) -> str:
        if self.index is None:
            return self.tensor
        return f"{self.tensor}[{', '.join(str(e) for e in self.index)}]"


@lru_cache(maxsize=65536)
def parse_expr(text: str) -> Index:
    """Parse one index expression; raises ValueError with a short reason."""
    s = text.strip()
    if s.startswith("@"):
        if not is_tensor_name(s[1:]):
            raise ValueError(f"bad indirect index {text!r}: expected @tensor_name")
        return Indirect(s[1:])
    if _NAME.match(s):
        return AffineExpr(((s, 1),), 0)
    if not s:
        raise ValueError("empty index expression")
    coeffs: dict[str, int] = {}
    const = 0
    pos = 0
    first = True
    while pos < len(s):
        m = _TERM.match(s, pos)
        if not m or m.end() == pos or (not first and m.group(1) is None):
            raise ValueError(f"bad index expression {text!r}: expected terms like 2*P + R - 1")
        sign = -1 if m.group(1) == "-" else 1
        if m.group(2):
            coeffs[m.group(3)] = coeffs.get(m.group(3), 0) + sign * int(m.group(2))
        elif m.group(4):
            coeffs[m.group(4)] = coeffs.get(m.group(4), 0) + sign * int(m.group(5))
        elif m.group(6):
            const += sign * int(m.group(6))
        else:
            coeffs[m.group(7)] = coeffs.get(m.group(7), 0) + sign
        pos = m.end()
        first = False
    return AffineExpr(tuple(sorted((r, c) for r, c in coeffs.items() if c != 0)), const)


def parse_access(text: str) -> Access:
    """Parse ``name`` or ``name[e1, e2, ...]``; raises ValueError with a short reason."""
    s = text.strip()
    br = s.find("[")
    if br < 0:
        if not is_tensor_name(s):
            raise ValueError(f"bad tensor name {s!r}")
        return Access(s, None)
    if not s.endswith("]"):
        raise ValueError(f"bad access {text!r}: expected tensor[expr, ...]")
    name, inner = s[:br].strip(), s[br + 1:-1].strip()
    if not is_tensor_name(name):
        raise ValueError(f"bad tensor name {name!r} in access {text!r}")
    return Access(name, _parse_index(inner))


@lru_cache(maxsize=65536)
def _parse_index(inner: str) -> tuple[Index, ...]:
    """The expressions of ``e1, e2, ...`` (shared between accesses with the same index)."""
    if not inner:
        return ()
    return tuple(parse_expr(p) for p in inner.split(","))
