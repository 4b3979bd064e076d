"""Limits on the numbers a graph file may hold, and the echo of user content in error lines.

Indices are int64 (numpy, the executor, the exporters' tools): a rank is at most 2**62, a tensor's
elements and a node's iteration points stay below 2**63; NaN and infinities only where a value is
data (or a tolerance); integers no field can hold are refused before anything converts them.
:mod:`.codec` calls these with its decoder (anything with ``err(path, message)``).

>>> _plain(2**62), _plain(2**63)
(True, False)
"""

from __future__ import annotations

import math
from typing import Any

#: Largest rank size, and (below) the bound on a tensor's elements and a node's iteration points:
#: indices are int64 (numpy, the executor, the exporters' tools), so every flat index must stay
#: below 2**63; a rank of 2**62 leaves room for a stride or an offset beside it.
MAX_RANK_SIZE = 2**62
MAX_INDEX_SPACE = 2**63
#: Most nodes (or tensors) a file may unroll to through repeat blocks: the graph in memory is the
#: unrolled one (about a kilobyte an item), so 2**21 items is about 2 GB; a file of plain items is
#: held to its byte size instead (SOLAR_IO_MAX_BYTES), a repeat count is not.
MAX_UNROLLED_ITEMS = 2**21


#: Data values, which may be any float (NaN from uninitialised memory, -inf for max-pool padding or
#: masks) or any integer a float can hold: a node's fill, a constant's value, a source op's attrs.
DATA_FIELDS = frozenset({"fill", "value"})
#: Fields that may be infinite besides data: a tolerance (inf: none) and a measured error that overflowed.
INFINITE_OK = frozenset({"rtol", "atol", "max_abs_error", "max_rel_error"})


def check_numbers(dec: Any, v: Any, path: tuple) -> None:
    """Refuse numbers no field can hold, anywhere in the document, each naming its field: integers
    of 2**63 or more in magnitude (int64) outside data values, integers no float can hold in data
    values (2**1100), NaN and infinities outside data values and INFINITE_OK (rank sizes: _ranks)."""
    # the test of _plain, written out in both loops: they meet every value of the document
    if isinstance(v, dict):
        for k, x in v.items():
            t = type(x)
            if t is str or t is bool or x is None or (t is int and -MAX_INDEX_SPACE < x < MAX_INDEX_SPACE) or (
                    t is float and math.isfinite(x)) or (path == () and k == "ranks"):
                continue
            check_numbers(dec, x, path + (str(k),))
        return
    if isinstance(v, list):
        for i, x in enumerate(v):
            t = type(x)
            if t is str or t is bool or x is None or (t is int and -MAX_INDEX_SPACE < x < MAX_INDEX_SPACE) or (
                    t is float and math.isfinite(x)):
                continue
            check_numbers(dec, x, path + (i,))
        return
    data = bool(path) and (path[-1] in DATA_FIELDS or path[-2:-1] == ("attrs",))
    if isinstance(v, float) and not math.isfinite(v) and not data:
        if math.isnan(v) or path[-1] not in INFINITE_OK:
            dec.err(path, f"must be a finite number, got {v}")
    elif isinstance(v, int) and not isinstance(v, bool):
        if data and abs(v) >= _FLOAT_LIMIT:
            dec.err(path, f"integer of {v.bit_length()} bits is too large for a float")
        elif not data and abs(v) >= MAX_INDEX_SPACE:
            dec.err(path, f"integer of {v.bit_length()} bits is outside the int64 range (|x| < 2**63)")


_FLOAT_LIMIT = 2**1024 - 2**970  # integers from here on round to infinity as floats


def _plain(x: Any) -> bool:
    """True for a value :func:`check_numbers` accepts in any field (a string, a finite float, an integer
    inside int64, a boolean, null): the walk skips it without building its path.

    >>> _plain("a"), _plain(2**62), _plain(1.5), _plain(float("inf")), _plain(2**63), _plain([])
    (True, True, True, False, False, False)
    """
    t = type(x)
    if t is str or t is bool or x is None:
        return True
    if t is int:
        return -MAX_INDEX_SPACE < x < MAX_INDEX_SPACE
    return t is float and math.isfinite(x)


def echo(v: Any, limit: int = 200) -> str:
    """``repr(v)`` cut to ``limit`` characters (+ "..."): user content echoed in an error line."""
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + "..."


def check_index_space(dec: Any, sizes: dict[str, int], top: dict, tensors: tuple, nodes: tuple) -> None:
    """Refuse tensors and iteration spaces of 2**63 or more points (see :data:`MAX_INDEX_SPACE`)."""
    for key, records, ranks_of, what in (("tensors", tensors, lambda t: t.ranks, "elements"),
                                         ("nodes", nodes, lambda n: n.space, "iteration points")):
        raw = top.get(key) if isinstance(top.get(key), list) else []
        where = {r.get("name"): i for i, r in enumerate(raw) if isinstance(r, dict) and isinstance(r.get("name"), str)}
        for rec in records:
            points = 1
            for r in ranks_of(rec):
                points *= sizes.get(r, 1)
            if points >= MAX_INDEX_SPACE:
                dec.err((key, where.get(rec.name, 0)), f"{rec.name} has {points} {what}, over the 2**63 limit "
                        "of int64 indices")
