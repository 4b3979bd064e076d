"""Measured run times of model files (PyTorch eager/compile, JAX jit) and their headroom against SOL."""

from .measure import Headroom, Measurement, capture_graph, headroom, measure_file
from .runners import RunOptions
from .timing import CacheFlusher, Timing, time_runs

__all__ = ["CacheFlusher", "Headroom", "Measurement", "RunOptions", "Timing", "capture_graph", "headroom",
           "measure_file", "time_runs"]
