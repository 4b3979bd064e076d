"""Loading a model file: the benchmark convention, ``--entry``, ``--input`` specs and ``--dtype``.

A model file defines ``class Model(nn.Module)``, ``get_inputs()`` and (optionally)
``get_init_inputs()``; the model is ``Model(*get_init_inputs())`` called as
``model(*get_inputs())``. ``--entry module_or_file:callable`` names another module class, a
factory function returning a module, or a plain function used as the forward. This module
*runs the user's code*: only ``solar-io capture`` calls it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...dtypes import FILE_TO_FRAMEWORK
from ..common.errors import CaptureError, InputSpecError
from ..common.inputs import parse_input_spec as common_input_spec
from ..common.inputs import split_entry
from ..common.source_file import file_spec
from ..common.validation import Acceptance

#: File dtype -> torch dtype (``--input`` spellings are mapped to file dtypes by the shared parser).
FILE_TO_TORCH = {file: getattr(torch, name) for file, name in FILE_TO_FRAMEWORK.items()}
ACCELERATORS = ("cuda", "xpu", "mps", "hip")
#: The seed of inputs made on the CPU for a meta-device capture: validation's default (its seed 0, + 1).
INPUT_SEED = 1
#: The most bytes of CPU inputs a source keeps to hand out again (:meth:`Source._remembered`).
REMEMBERED_BYTES = 1 << 30


class OnDevice(torch.overrides.TorchFunctionMode):
    """Build on ``device`` even where the user's code names an accelerator: ``device='cuda'``
    arguments, ``.cuda()`` and ``.to('cuda')`` land on ``device``, so a benchmark file written for
    a GPU captures on a CPU-only machine (the capture itself runs on meta tensors). Used together
    with ``with torch.device(device)``, which sets the default."""

    def __init__(self, device: str):
        super().__init__()
        self.device = torch.device(device)

    def _swap(self, v: Any) -> Any:
        if isinstance(v, str) and v.split(":")[0] in ACCELERATORS:
            return self.device
        if isinstance(v, torch.device) and v.type in ACCELERATORS:
            return self.device
        return v

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func in _MOVES:  # tensor.cuda(), tensor.xpu(), tensor.mps()
            return args[0].to(self.device)
        if "device" in kwargs:
            kwargs["device"] = self._swap(kwargs["device"])
        if func is torch.Tensor.to:
            args = tuple(self._swap(a) for a in args)
        return func(*args, **kwargs)


_MOVES = tuple(m for m in (getattr(torch.Tensor, a, None) for a in ("cuda", "xpu", "mps")) if m is not None)


class _FnModule(nn.Module):
    """A plain function as a module (its forward)."""

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


@dataclass
class Source:
    """A loaded model source: how to build the model and its inputs on a device."""

    path: Path
    name: str
    sha256: str
    model_factory: Callable[[], nn.Module]
    inputs_factory: Callable[[], list[Any]]
    dtype: torch.dtype | None = None
    eval_mode: bool = False
    accelerator: bool = False  # the source names an accelerator device ('cuda', ...): see OnDevice
    scalars: dict[int, Any] | None = field(default=None, repr=False)  # see inputs()
    made: dict[str, Any] = field(default_factory=dict, repr=False)  # see _remembered()
    acceptance: Acceptance | None = None  # a benchmark's own test of an output: reported when validation fails

    def model(self, device: str) -> nn.Module:
        """A fresh model instance on ``device`` (meta: no weight memory).

        On meta, a model whose ``__init__`` needs real data is built on the CPU and moved.
        The model stays in the mode its constructor leaves it in (training, as the benchmark
        convention runs it: batch norm uses batch statistics) unless ``eval_mode``; dropout
        modules are always put in eval mode, so the captured computation is deterministic.
        """
        try:
            with torch.device(device), OnDevice(device):
                m = self.model_factory()
        except CaptureError:
            raise
        except Exception as e:
            if device == "cpu":
                raise CaptureError(f"{self.name}: building the model raised {type(e).__name__}: {e}") from e
            try:
                with OnDevice("cpu"):
                    m = self.model_factory()
                m = m.to(device)
            except Exception as e2:
                raise CaptureError(f"{self.name}: building the model raised {type(e2).__name__}: {e2}") from e2
        if not isinstance(m, nn.Module):
            raise CaptureError(f"{self.name}: the entry point did not give an nn.Module or function")
        if self.accelerator:
            forward = m.forward

            def on_device_forward(*args: Any, **kwargs: Any) -> Any:
                with OnDevice(device):
                    return forward(*args, **kwargs)

            m.forward = on_device_forward  # tensors forward creates on 'cuda' land on ``device`` too
        if self.dtype is not None:
            m = m.to(self.dtype)
        if self.eval_mode:
            return m.eval()
        for sub in m.modules():
            if isinstance(sub, nn.modules.dropout._DropoutNd):
                sub.eval()
        return m

    def traced_numbers(self, xs: list[Any]) -> list[Any]:
        """``xs`` with each Python number the one the first call gave (see :meth:`inputs`)."""
        if self.scalars is None:
            self.scalars = {i: x for i, x in enumerate(xs) if isinstance(x, (bool, int, float))}
            return xs
        return [self.scalars.get(i, x) if isinstance(x, (bool, int, float)) else x for i, x in enumerate(xs)]

    def _made(self, device: str) -> list[Any]:
        """What the inputs factory gives on ``device``, or on the CPU under ``INPUT_SEED`` where it raised
        there (see :meth:`inputs`)."""
        try:
            with torch.device(device), OnDevice(device):
                return list(self.inputs_factory())
        except Exception:
            pass
        try:
            with OnDevice("cpu"), torch.random.fork_rng(devices=[]):
                torch.manual_seed(INPUT_SEED)
                start = torch.random.get_rng_state()
                xs = list(self.inputs_factory())
                end = torch.random.get_rng_state()
        except Exception as e:
            raise CaptureError(f"{self.name}: get_inputs() raised {type(e).__name__}: {e}") from e
        if device == "meta":
            self.made["meta"] = [torch.empty_like(x, device="meta") if isinstance(x, torch.Tensor) else x for x in xs]
            self._keep(start, xs, end)  # validation's inputs, from the same seed (a CPU call keeps its own)
        return xs

    def _remembered(self, device: str) -> list[Any]:
        """The factory's inputs on ``device``, made once per random state.

        A generator is a function of the CPU random state it starts from (validation seeds it), so a
        second call from the same state gets copies of the first call's tensors and leaves the state where
        the first call did. On meta, a generator that needs real data ran on the CPU under ``INPUT_SEED``
        (its own fixed state): later meta calls get tensors of the same shapes without running it again.
        An NVFP4 quantiser's ``get_inputs`` (16 masked writes over each weight) took 13 s a call, 8 calls a
        capture. At most one CPU call is kept, up to ``REMEMBERED_BYTES`` of tensors."""
        if device == "meta" and "meta" in self.made:
            return [torch.empty_like(x) if isinstance(x, torch.Tensor) else x for x in self.made["meta"]]
        if device != "cpu":
            return self._made(device)
        state = torch.random.get_rng_state()
        kept = self.made.get("cpu")
        if kept is not None and torch.equal(kept[0], state):
            torch.random.set_rng_state(kept[2])
            return [_copy(x) for x in kept[1]]
        xs = self._made(device)
        self._keep(state, xs, torch.random.get_rng_state())
        return xs

    def _keep(self, start: torch.Tensor, xs: list[Any], end: torch.Tensor) -> None:
        """Keep copies of ``xs``, made from random state ``start`` and leaving ``end`` (:meth:`_remembered`)."""
        if _rememberable(xs):
            self.made["cpu"] = (start, [_copy(x) for x in xs], end)

    def inputs(self, device: str) -> list[Any]:
        """Fresh inputs on ``device`` (floating ones cast to ``dtype`` when given).

        Inputs that are not tensors (Python numbers) are what the first call gave, on every later call:
        export bakes them into the program as constants, so a validation run with fresh random tensors
        must see the numbers the graph holds (a scale the generator computed as ``w.amax().item()``).
        A generator that needs real data on meta runs on the CPU under seed ``INPUT_SEED`` (the
        validation's default input seed), so the file's constants do not change from run to run."""
        xs = self._remembered(device)
        xs = self.traced_numbers(xs)
        out = []
        for x in xs:
            if isinstance(x, torch.Tensor):
                if x.device.type != device:
                    x = torch.empty_like(x, device=device) if device == "meta" else x.to(device)
                if self.dtype is not None and x.is_floating_point():
                    x = x.to(self.dtype)
            out.append(x)
        return out


def _copy(x: Any) -> Any:  # noqa: ANN401
    """A copy of tensor ``x`` (anything else as it is). Validation runs with deterministic algorithms, which
    fill new memory first, and that fill has no kernel for packed fp4; a copy overwrites it all anyway."""
    if not isinstance(x, torch.Tensor):
        return x
    det = torch.utils.deterministic
    fill = det.fill_uninitialized_memory
    det.fill_uninitialized_memory = False
    try:
        return x.clone()
    finally:
        det.fill_uninitialized_memory = fill


def _rememberable(xs: list[Any]) -> bool:
    """Whether copies of ``xs`` are the same inputs again: plain CPU tensors that need no gradient and share
    no memory (a copy would break the aliasing), and immutable numbers, in all ``REMEMBERED_BYTES`` at most."""
    tensors = [x for x in xs if isinstance(x, torch.Tensor)]
    if any(not isinstance(x, (torch.Tensor, bool, int, float, str, type(None))) for x in xs):
        return False
    if any(type(t) is not torch.Tensor or t.requires_grad or t.device.type != "cpu" for t in tensors):
        return False
    storages = [t.untyped_storage().data_ptr() for t in tensors if t.numel()]
    return len(set(storages)) == len(storages) and \
        sum(t.numel() * t.element_size() for t in tensors) <= REMEMBERED_BYTES


def _import_file(path: Path) -> Any:
    name = f"solar_io_user_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}"
    spec = file_spec(name, path)
    if spec is None or spec.loader is None:
        raise CaptureError(f"{path.name}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        sys.modules.pop(name, None)
        raise CaptureError(f"{path.name}: importing the model file raised {type(e).__name__}: {e}") from e
    return mod


def parse_input_spec(spec: str) -> tuple[str | None, torch.dtype, list[int]]:
    """``"x=bf16[8,1024,4096]"`` -> (name, dtype, shape); InputSpecError when malformed."""
    name, dt, shape = common_input_spec(spec)
    return name, FILE_TO_TORCH[dt], shape


def _spec_inputs(specs: list[str]) -> Callable[[], list[Any]]:
    parsed = [parse_input_spec(s) for s in specs]

    def make() -> list[Any]:
        out = []
        for _, dt, shape in parsed:
            if dt.is_floating_point:
                out.append(torch.randn(shape, dtype=dt))
            elif dt == torch.bool:
                out.append(torch.rand(shape) > 0.5)
            else:
                out.append(torch.randint(0, 2, shape, dtype=dt))
        return out

    return make


def load_source(path: Path, *, entry: str | None = None, inputs: list[str] | None = None,
                dtype: str | None = None, eval_mode: bool = False, inputs_from: str | None = None) -> Source:
    """Load a model file (or ``--entry``) and return how to build its model and inputs."""
    path = Path(path)
    tdt = None
    if dtype:
        if dtype not in ("bf16", "fp16", "fp32"):
            raise InputSpecError(f"bad --dtype {dtype!r}: use bf16, fp16 or fp32")
        tdt = FILE_TO_TORCH[dtype]
    for spec in inputs or []:
        parse_input_spec(spec)
    if entry:
        where, attr = split_entry(entry)
        if where.endswith(".py") or Path(where).is_file():
            mod = _import_file(Path(where))
            path = Path(where)
        elif where:
            try:
                mod = importlib.import_module(where)
            except Exception as e:
                raise CaptureError(f"--entry {entry}: importing {where} raised {type(e).__name__}: {e}") from e
            if getattr(mod, "__file__", None):
                path = Path(mod.__file__)
        else:
            mod = _import_file(path)
    else:
        if not path.is_file():
            raise CaptureError(f"{path}: no such file")
        mod = _import_file(path)
        attr = "Model"
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CaptureError(f"{path}: cannot read: {e.strerror or e}") from None
    name = path.name
    target = getattr(mod, attr, None)
    if target is None:
        raise CaptureError(f"{name}: no {attr} defined (expected class Model(nn.Module), get_inputs())")
    init = getattr(mod, "get_init_inputs", None)

    def init_args() -> list[Any]:
        if init is None:
            return []
        try:
            return list(init())
        except Exception as e:
            raise CaptureError(f"{name}: get_init_inputs() raised {type(e).__name__}: {e}") from e

    if inspect.isclass(target) and issubclass(target, nn.Module):
        def factory() -> nn.Module:
            return target(*init_args())
    elif callable(target):
        sig = inspect.signature(target)
        required = [p for p in sig.parameters.values() if p.default is p.empty and
                    p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

        def factory() -> nn.Module:
            if not required:
                made = target()
                if isinstance(made, nn.Module):
                    return made
            return _FnModule(target)
    else:
        raise CaptureError(f"{name}: {attr} is not a module class or a function")
    if inputs:
        make_inputs = _spec_inputs(inputs)
    else:
        gi = getattr(mod, inputs_from or "get_inputs", None)
        if inputs_from and not callable(gi):
            raise CaptureError(f"{name}: --inputs-from names {inputs_from!r}, which is not a callable there")
        if gi is None:
            raise CaptureError(f"{name}: no get_inputs() defined (or give --input NAME=DTYPE[DIMS])")
        make_inputs = gi
    accelerator = re.search(rb"""\.cuda\(|["'](cuda|xpu|mps)(:\d+)?["']""", data) is not None
    return Source(path, name, hashlib.sha256(data).hexdigest(), factory, make_inputs, tdt, eval_mode, accelerator)
