"""Memory budgets: what running a captured model needs, and what this machine has free."""

from __future__ import annotations

import os
from pathlib import Path

from ..frontends.common.validation import graph_bytes
from ..graph import Graph


def run_bytes(g: Graph) -> int:
    """Bytes an eager run of ``g`` needs at most: every tensor of the graph materialised once."""
    return int(graph_bytes(g))


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """Memory available to new allocations (MemAvailable), or physical memory when unreadable."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30
