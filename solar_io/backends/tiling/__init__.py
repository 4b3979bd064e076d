"""The tiling backend: cache-aware SOL with finite on-chip memory (PuLP + CBC).

:mod:`.einsum` (one einsum as a tiling problem), :mod:`.sizes` (tile sizes: divisors, counts),
:mod:`.relax` (why Q(S) is a lower bound over every integer tiling: the interval relaxation),
:mod:`.ilp` (Q(S), refined and cached), :mod:`.model` (the tiling integer program), :mod:`.solver`
(CBC to proven optimality), :mod:`.sweep` (the same optimum by enumeration for few ranks),
:mod:`.floors` (provable lower bounds), :mod:`.curve` (the Q(S) ski-slope),
:mod:`.fusion` (fused chains), :mod:`.structure` (structural keys: repeated layers solved once),
:mod:`.segments` (the traffic of one candidate group), :mod:`.partition` (fusion partition and
the cache-aware SOL),
:mod:`.sol` (the ``cache-aware`` fidelity of ``solar-io bound``), :mod:`.cli` (``solar-io tiling``).
"""

import warnings

# PuLP 3.x announces API changes of PuLP 4 (pyproject pins pulp < 4); they are not the user's concern.
warnings.filterwarnings("ignore", message=r".*PuLP 4\.0.*", category=DeprecationWarning)

from .einsum import Einsum, einsum_of  # noqa: E402
from .floors import Floor, floor  # noqa: E402
from .ilp import STATS, Tiling, clear_cache, solve  # noqa: E402
from .partition import CacheAware, GroupResult, cache_aware, capacity_of  # noqa: E402
from .segments import clear_chain_cache  # noqa: E402

__all__ = ["STATS", "CacheAware", "Einsum", "Floor", "GroupResult", "Tiling", "cache_aware", "capacity_of",
           "clear_cache", "clear_chain_cache", "einsum_of", "floor", "solve"]
