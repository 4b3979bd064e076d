"""Running CBC (through PuLP) to proven optimality, with a time limit: the tiling ILP (:mod:`.model`)
and the chain ILP (:mod:`.fusion`) both solve through :func:`solve_exactly`. PuLP is imported only
when a problem is solved: most bounds never need one.

>>> proven.__doc__.split(';')[0]
'True when CBC proved the solution optimal'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pulp

STATS = {"solved": 0, "hits": 0, "timeouts": 0, "cbc": 0}  # cbc: solver runs (einsum and chain ILPs)


class TimeLimitReached(Exception):
    """A solve stopped at its time limit before proving optimality."""


def solve_exactly(prob: pulp.LpProblem, time_limit: float | None, options: tuple[str, ...] = ()) -> bool:
    """Solve ``prob`` with CBC to proven optimality (gap 0) within ``time_limit`` seconds (None: no
    limit; 0 or less: give up at once). True when solved, False when infeasible; raises
    :class:`TimeLimitReached` when stopped at the limit."""
    if time_limit is not None and time_limit <= 0:
        raise TimeLimitReached
    STATS["cbc"] += 1
    prob.solve(cbc(time_limit, options))
    return proven(prob)


def cbc(time_limit: float | None, options: tuple[str, ...] = ()) -> pulp.LpSolver:
    """The CBC command for one exact solve (gap 0) with an optional time limit in seconds."""
    import pulp  # imported only when an ILP is solved: most bounds never need one

    kw = {} if time_limit is None else {"timeLimit": time_limit}
    return pulp.PULP_CBC_CMD(msg=0, gapRel=0, gapAbs=0, options=list(options), **kw)


def proven(prob: pulp.LpProblem) -> bool:
    """True when CBC proved the solution optimal; raises :class:`TimeLimitReached` when it stopped
    early (with or without an incumbent); False when the problem is infeasible."""
    import pulp  # imported only when an ILP is solved: most bounds never need one

    if prob.sol_status == pulp.LpSolutionOptimal:
        return True
    if prob.status in (pulp.LpStatusInfeasible, pulp.LpStatusUnbounded):
        return False
    raise TimeLimitReached


__all__ = ["STATS", "TimeLimitReached", "cbc", "proven", "solve_exactly"]
