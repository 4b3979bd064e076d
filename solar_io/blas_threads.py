"""One BLAS thread for small matrix products (the reference executor's many small matmuls).

numpy's OpenBLAS splits every product over all cores. For a (10 x 256) @ (256 x 768) step of a
recurrence that gains nothing, and on a loaded machine the waiting threads spin: validating
KernelBench's 512-step GRU took 2.5x the CPU time with two BLAS threads as with one (10.1 s vs
4.2 s at 128 steps). :func:`threads_for` runs a product of fewer than ``SMALL_MACS`` multiply-adds
on one thread, through OpenBLAS's own ``openblas_set_num_threads`` (found in the process's loaded
libraries); with another BLAS, or none found, it changes nothing. Results are the same: OpenBLAS
splits rows and columns among threads, not the reduction.

>>> with threads_for(1000):
...     pass
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

#: Products with fewer multiply-adds than this run on one BLAS thread.
SMALL_MACS = 1 << 24
_SYMBOLS = ("scipy_openblas_{}64_", "scipy_openblas_{}", "openblas_{}64_", "openblas_{}")


@lru_cache(maxsize=1)
def _openblas() -> tuple[Any, Any] | None:
    """(get_num_threads, set_num_threads) of the loaded OpenBLAS, or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            paths = sorted({p for p in f.read().split() if "openblas" in p and ".so" in p})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in _SYMBOLS:
            get = getattr(lib, sym.format("get_num_threads"), None)
            put = getattr(lib, sym.format("set_num_threads"), None)
            if get is not None and put is not None:
                put.argtypes, put.restype, get.restype = [ctypes.c_int], None, ctypes.c_int
                return get, put
    return None


@contextmanager
def threads_for(macs: int) -> Iterator[None]:
    """Within: one BLAS thread if a product of ``macs`` multiply-adds is small, else as it was."""
    blas = _openblas() if macs < SMALL_MACS else None
    if blas is None:
        yield
        return
    get, put = blas
    before = get()
    put(1)
    try:
        yield
    finally:
        put(before)
