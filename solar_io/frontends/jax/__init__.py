"""The JAX frontend: capture JAX functions and Flax modules through their jaxprs.

Only this package imports jax and flax. ``capture_file(path, *, validate, strict, **options)``
is the entry point ``solar-io capture`` dispatches to.
"""

from .capture import capture_file, capture_function

__all__ = ["capture_file", "capture_function"]
