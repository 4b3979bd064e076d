"""Tile sizes of one rank: its divisors (from its prime factors: deterministic Miller-Rabin, Pollard's rho),
tile counts, and the candidate tile sizes the brute-force references of the tests enumerate.

>>> trips(10, 4), candidates(12)
(3, (1, 2, 3, 4, 6, 12))
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

RAGGED_ABOVE = 64  # ranks larger than this also get non-divisor (power-of-two) tile sizes


@lru_cache(maxsize=1 << 12)
def divisors(n: int) -> list[int]:
    """The divisors of n, ascending, from n's prime factors (milliseconds for any n < 2**64, where
    trial division up to sqrt(n) would take hours for a rank of size 2**62).

    >>> divisors(12), len(divisors(2**62)), divisors(2**61 - 1)
    ([1, 2, 3, 4, 6, 12], 63, [1, 2305843009213693951])
    """
    out = [1]
    for p, k in sorted(_factor(n).items()):
        out = [d * p**e for d in out for e in range(k + 1)]
    return sorted(out)


_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)  # deterministic Miller-Rabin below 3.3e24


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _split(n: int) -> int:
    """A non-trivial factor of the odd composite n (Pollard's rho with Floyd cycle finding)."""
    for c in itertools.count(1):
        x = y = 2
        d = 1
        while d == 1:
            x = (x * x + c) % n
            y = (y * y + c) % n
            y = (y * y + c) % n
            d = math.gcd(abs(x - y), n)
        if d != n:
            return d
    raise AssertionError("unreachable")


def _factor(n: int) -> dict[int, int]:
    """{prime: exponent} of n >= 1: small primes by trial division, the rest by Pollard's rho."""
    out: dict[int, int] = {}
    for p in (2, 3, 5, 7, 11, 13):
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if _is_prime(m):
            out[m] = out.get(m, 0) + 1
        else:
            d = _split(m)
            stack += [d, m // d]
    return out


def trips(n: int, t: int) -> int:
    """Tiles of size t along a rank of size n (the last one ragged when t does not divide n)."""
    return -(-n // t)


def candidates(n: int, limit: int = 16, ragged: bool = False) -> tuple[int, ...]:
    """Tile sizes of a rank of size n: its divisors and, with ``ragged`` for ranks over 64, the
    powers of two below n as well (a ragged last tile; without them a prime-sized rank could only
    be tiled by 1 or n), thinned to about ``limit`` log-spaced ones (1 and n always kept)."""
    pool = set(divisors(n))
    if ragged and n > RAGGED_ABOVE:
        pool |= {1 << k for k in range(1, n.bit_length()) if (1 << k) < n}
    ds = sorted(pool)
    if len(ds) <= limit:
        return tuple(ds)
    keep = {1, n}
    for k in range(1, limit - 1):
        target = n ** (k / (limit - 1))
        keep.add(min(ds, key=lambda d: abs(math.log(d) - math.log(target))))
    return tuple(sorted(keep))


__all__ = ["RAGGED_ABOVE", "candidates", "divisors", "trips"]
