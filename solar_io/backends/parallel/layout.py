"""A parallel layout (``--parallel tp=8,pp=4,dp=16,ep=8,sp``) and where each chip of it sits.

Chips are numbered with tensor parallelism innermost, then data parallelism, then pipeline stages
(Megatron-LM's order): chip ``c = t + tp * (d + dp * p)``. Expert parallelism is carved out of the
data-parallel ranks (an EP group is ``ep`` consecutive DP ranks), so it adds no chips: ``ep`` must
divide ``dp``; when ``dp`` is not given it is taken equal to ``ep``. ``sp`` (sequence parallelism)
reuses the TP group and needs ``tp > 1``.

>>> lay = parse_layout("tp=2,pp=2,dp=4,ep=2,sp")
>>> lay.chips, lay.group_stride("tp"), lay.group_stride("ep"), lay.group_stride("pp")
(16, 1, 2, 8)
"""

from __future__ import annotations

from dataclasses import dataclass

from solar_io.errors import SolarIOError

DIMENSIONS = ("tp", "pp", "dp", "ep")


class ParallelError(SolarIOError):
    """A layout, system or sharding that cannot be used as asked (one line naming the option)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Degrees of each kind of parallelism (1 = not used) and whether SP is on."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    sp: bool = False
    dp_given: bool = True  # False when dp was set from ep (reported as an assumption)

    @property
    def chips(self) -> int:
        """Chips the layout occupies: tp x pp x dp (EP lives inside DP)."""
        return self.tp * self.pp * self.dp

    def group_stride(self, dim: str) -> int:
        """Distance in chip numbers between neighbouring members of a ``dim`` group."""
        return {"tp": 1, "ep": self.tp, "dp": self.tp, "pp": self.tp * self.dp}[dim]

    def group_size(self, dim: str) -> int:
        """Members of one ``dim`` group."""
        return {"tp": self.tp, "ep": self.ep, "dp": self.dp, "pp": self.pp}[dim]

    def groups(self, dim: str) -> list[list[int]]:
        """Every ``dim`` group as its chip numbers (tp innermost, then dp, then pp; ep inside dp).

        >>> make_layout(tp=2, dp=2).groups("dp")
        [[0, 2], [1, 3]]
        """
        stride, n = self.group_stride(dim), self.group_size(dim)
        span = stride * n  # chips covered by one block of groups
        return [[base + off + k * stride for k in range(n)]
                for base in range(0, self.chips, span) for off in range(stride)]

    def __str__(self) -> str:
        parts = [f"{d}={getattr(self, d)}" for d in DIMENSIONS if getattr(self, d) > 1]
        return ",".join(parts + (["sp"] if self.sp else [])) or "single chip"


def parse_layout(text: str) -> Layout:
    """``"tp=8,pp=4,dp=16,ep=8,sp"`` (any subset, any order) -> :class:`Layout`."""
    values: dict[str, int] = {}
    sp = False
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        name, eq, value = part.partition("=")
        name = name.strip().lower()
        if name == "sp" and not eq:
            sp = True
            continue
        if name not in DIMENSIONS or not eq:
            raise ParallelError(f"--parallel: cannot read {part!r}; write e.g. tp=8,pp=4,dp=16,ep=8,sp "
                                f"(dimensions {', '.join(DIMENSIONS)}, and sp)")
        if name in values:
            raise ParallelError(f"--parallel: {name} is given twice")
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n < 1:
            raise ParallelError(f"--parallel {name}: must be a whole number >= 1, got {value!r}")
        values[name] = n
    return make_layout(**values, sp=sp)


def make_layout(tp: int = 1, pp: int = 1, dp: int | None = None, ep: int = 1, sp: bool = False) -> Layout:
    """A checked layout; ``dp`` defaults to ``ep`` (experts spread over data-parallel ranks)."""
    given = dp is not None
    dp = dp if dp is not None else ep
    for name, n in (("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep)):
        if not isinstance(n, int) or n < 1:
            raise ParallelError(f"--parallel {name}: must be a whole number >= 1, got {n!r}")
    if dp % ep:
        raise ParallelError(f"--parallel: ep={ep} must divide dp={dp} (expert-parallel groups are carved out "
                            "of the data-parallel ranks)")
    if sp and tp == 1:
        raise ParallelError("--parallel sp: sequence parallelism shards over the tensor-parallel group; give tp>1")
    return Layout(tp, pp, dp, ep, sp, given or ep == 1)


__all__ = ["DIMENSIONS", "Layout", "ParallelError", "make_layout", "parse_layout"]
