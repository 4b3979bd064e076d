"""How to run a model file of each frontend for timing: one registry of small runner factories.

A runner factory loads a model file the same way its frontend's capture does (so the timed
program is the captured program), builds real weights and seeded inputs on the requested
device, and returns a :class:`Runnable`: a zero-argument call that performs one forward pass and
waits for it to finish, plus how to time it on that device. torch and jax are imported only
inside their factories.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SolarIOError
from .timing import CacheFlusher


class MeasureError(SolarIOError):
    """The model could not be run for timing (one line naming the file)."""


@dataclass
class Runnable:
    """One forward pass of a model, ready to time."""

    call: Callable[[], object]
    device: str
    runtime: str  # e.g. "torch 2.13.0 eager", "torch 2.13.0 compile", "jax 0.8 jit"
    threads: int | None
    clock: str = "perf_counter_ns"
    timer: Callable[[Callable[[], object]], float] | None = None
    make_flusher: Callable[[], Callable[[], None]] = CacheFlusher
    notes: list[str] = field(default_factory=list)
    fuses: bool = False  # the runtime fuses source ops into larger kernels (torch.compile, jax.jit)


@dataclass(frozen=True)
class RunOptions:
    """What to run: the frontend's loading options and the execution mode."""

    dtype: str | None = None
    compile: bool = False
    device: str = "cpu"
    entry: str | None = None
    inputs: tuple[str, ...] = ()
    eval_mode: bool = False
    seed: int = 0


RunnerFactory = Callable[[Path, RunOptions], Runnable]
RUNNERS: dict[str, RunnerFactory] = {}


def runner(frontend: str) -> Callable[[RunnerFactory], RunnerFactory]:
    """Register the runner factory of ``frontend``."""
    def add(fn: RunnerFactory) -> RunnerFactory:
        RUNNERS[frontend] = fn
        return fn
    return add


def make_runnable(path: Path, frontend: str, options: RunOptions) -> Runnable:
    """The :class:`Runnable` of ``path`` through ``frontend`` (MeasureError if it cannot run)."""
    if frontend not in RUNNERS:
        raise MeasureError(f"{path.name}: measuring {frontend} programs is not supported "
                           f"(measurable: {', '.join(sorted(RUNNERS))})")
    try:
        return RUNNERS[frontend](path, options)
    except SolarIOError:
        raise
    except Exception as e:
        raise MeasureError(f"{path.name}: running the model raised {type(e).__name__}: {str(e)[:300]}") from e


@runner("torch")
def torch_runnable(path: Path, options: RunOptions) -> Runnable:
    """PyTorch eager (or ``torch.compile``) on CPU or CUDA, under ``no_grad``.

    The model is built as the capture builds it (dropout modules in eval mode); functional
    dropout calls run as the file wrote them, which only adds work the bound does not count.
    """
    import torch

    from ..frontends.torch.loader import load_source

    source = load_source(path, entry=options.entry, inputs=list(options.inputs) or None, dtype=options.dtype,
                         eval_mode=options.eval_mode)
    device = options.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise MeasureError(f"{path.name}: --device {device}: CUDA is not available here")
    torch.manual_seed(options.seed)
    model = source.model(device)
    torch.manual_seed(options.seed + 1)
    inputs = source.inputs(device)
    fn: Callable[..., Any] = model
    mode = "eager"
    if options.compile:
        fn = torch.compile(model)
        mode = "compile"

    def call() -> object:
        with torch.no_grad():
            return fn(*inputs)

    rt = f"torch {torch.__version__} {mode}"
    if device.startswith("cuda"):
        return Runnable(call, device, rt, None, "cuda-events", _cuda_timer(torch), lambda: _cuda_flusher(torch),
                        [f"GPU: {torch.cuda.get_device_name()}"], fuses=options.compile)
    return Runnable(call, device, rt, torch.get_num_threads(), fuses=options.compile)


def _cuda_timer(torch: Any) -> Callable[[Callable[[], object]], float]:
    def timed(run: Callable[[], object]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e-3
    return timed


def _cuda_flusher(torch: Any) -> Callable[[], None]:
    l2 = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or 64 << 20)
    buf = torch.empty(4 * l2, dtype=torch.uint8, device="cuda")

    def flush() -> None:
        buf.add_(1)
        torch.cuda.synchronize()
    flush.nbytes = buf.numel()  # type: ignore[attr-defined]
    return flush


@runner("jax")
def jax_runnable(path: Path, options: RunOptions) -> Runnable:
    """``jax.jit`` of the file's function (or Flax module), compiled once, on the default CPU device."""
    import jax

    from ..frontends.jax.capture import load_program

    if options.compile:
        raise MeasureError(f"{path.name}: --compile is for PyTorch files (JAX files always run under jax.jit)")
    if options.dtype or options.entry or options.inputs:
        raise MeasureError(f"{path.name}: --dtype/--entry/--input apply to PyTorch files only")
    prog = load_program(path)
    device = jax.devices("gpu" if options.device.startswith("cuda") else "cpu")[0]
    with jax.default_device(device):
        params = prog.make_params()
        inputs = prog.make_inputs()
    f = jax.jit(prog.fn)
    jax.block_until_ready(f(params, *inputs))  # compile outside the timed runs

    def call() -> object:
        return jax.block_until_ready(f(params, *inputs))

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return Runnable(call, str(device), f"jax {jax.__version__} jit", threads,
                    notes=["threads: XLA's CPU thread pool spans the process's CPUs"], fuses=True)
