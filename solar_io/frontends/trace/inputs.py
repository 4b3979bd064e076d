"""The arguments of a definition's ``run`` for one workload, on any device (meta for the capture).

- ``random``: floats from a normal distribution (fp8 cast from it), integers in {0, 1}, booleans
  at random (the convention of ``--input`` specs); the capture runs on meta, only validation sees
  the values.
- ``scalar``: the workload's value (a 0-d tensor when the definition's shape is ``[]``).
- ``safetensors``: the tensor read from the file (a small reader of the format; no dependency).
- ``custom``: ``custom_inputs_entrypoint(axes_and_scalars, device)`` of the reference, called once
  per set of inputs with every axis size and scalar input.
Every tensor's shape and dtype is checked against the definition.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..common.errors import CaptureError
from .axes import evaluate
from .definition import DEFINITION_DTYPES, Definition, TensorSpec
from .workload import Workload

#: safetensors dtype codes -> torch dtypes.
_ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "I64": torch.int64, "I32": torch.int32,
              "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
_HEADER_LIMIT = 100 << 20


def torch_dtype(spec: TensorSpec, where: str) -> torch.dtype:
    """The torch dtype of a spec (CaptureError when this torch has none)."""
    name = DEFINITION_DTYPES[spec.dtype][0]
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise CaptureError(f"{where}: dtype {spec.dtype}: this torch ({torch.__version__}) has no torch.{name}")
    return dt


def shape_of(spec: TensorSpec, sizes: dict[str, int]) -> tuple[int, ...]:
    """The concrete shape of a tensor spec (axis names replaced by their sizes)."""
    out = []
    for s in spec.shape or ():
        if not isinstance(s, str):
            out.append(s)
        elif s in sizes:
            out.append(sizes[s])
        elif s.strip().isdigit():
            out.append(int(s))
        else:  # arithmetic over axes, checked when the definition was read
            out.append(int(evaluate(s, sizes)))
    return tuple(out)


def read_safetensors(path: Path, key: str, where: str) -> torch.Tensor:
    """Tensor ``key`` of a ``.safetensors`` file: 8-byte little-endian header size, JSON header
    {key: {dtype, shape, data_offsets}}, then the raw little-endian data."""
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > _HEADER_LIMIT:
                raise CaptureError(f"{where}: {path.name}: header of {n} bytes is not a safetensors header")
            header = json.loads(f.read(n))
            if key not in header or key == "__metadata__":
                raise CaptureError(f"{where}: {path.name} has no tensor {key!r} (keys: "
                                   f"{', '.join(k for k in header if k != '__metadata__')})")
            info = header[key]
            dt = _ST_DTYPES.get(info.get("dtype"))
            if dt is None:
                raise CaptureError(f"{where}: {path.name}: tensor {key!r} has dtype {info.get('dtype')!r}, "
                                   "which this reader does not know")
            start, end = info["data_offsets"]
            f.seek(8 + n + start)
            raw = f.read(end - start)
    except OSError as e:
        raise CaptureError(f"{where}: {path}: cannot read: {e.strerror or e}") from None
    except (ValueError, KeyError, struct.error, TypeError) as e:
        raise CaptureError(f"{where}: {path.name}: not a safetensors file ({e})") from None
    shape = [int(s) for s in info.get("shape", [])]
    if len(raw) != torch.empty(shape, dtype=dt, device="meta").nbytes:
        raise CaptureError(f"{where}: {path.name}: tensor {key!r} holds {len(raw)} bytes, not shape {shape}")
    if not raw:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(bytearray(raw), dtype=dt).reshape(shape).clone()


def _random(shape: tuple[int, ...], dt: torch.dtype) -> torch.Tensor:
    if str(dt).startswith("torch.float4"):  # packed fp4 pairs: any byte is two valid values
        return torch.randint(0, 256, shape, dtype=torch.uint8).view(dt)
    if dt.is_floating_point:
        if dt.itemsize == 1:  # fp8: no randn kernel of its own
            return torch.randn(shape).to(dt)
        return torch.randn(shape, dtype=dt)
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(0, 2, shape, dtype=dt)


def _check(t: Any, spec: TensorSpec, shape: tuple[int, ...], dt: torch.dtype, where: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise CaptureError(f"{where}: gave {type(t).__name__}, not a tensor")
    if tuple(t.shape) != shape or t.dtype != dt:
        raise CaptureError(f"{where}: gave {t.dtype} {list(t.shape)}; the definition says {spec.dtype} {list(shape)}")
    return t


def input_factory(defn: Definition, wl: Workload, module: Any, order: list[str]) -> Callable[[], list[Any]]:
    """A function making the arguments of ``run`` (in ``order``: input and output parameter names)
    on the current default device."""
    custom_fn = getattr(module, defn.custom_entry, None) if defn.custom_entry else None
    if defn.custom_entry and any(s.kind == "custom" for s in wl.inputs.values()) and not callable(custom_fn):
        raise CaptureError(f"{defn.file}: custom_inputs_entrypoint: the reference defines no function "
                           f"{defn.custom_entry!r}")
    loaded = {n: read_safetensors(s.path, s.key, f"{wl.where}: inputs.{n}")  # type: ignore[arg-type]
              for n, s in wl.inputs.items() if s.kind == "safetensors"}

    def make() -> list[Any]:
        device = torch.get_default_device()
        made: dict[str, Any] = {}
        if any(s.kind == "custom" for s in wl.inputs.values()):
            env = dict(wl.sizes)
            env.update(wl.scalars())
            try:
                got = custom_fn(env, device)  # type: ignore[misc]
            except Exception as e:
                raise CaptureError(f"{defn.file}: {defn.custom_entry}() raised {type(e).__name__}: {e}") from e
            if not isinstance(got, dict):
                raise CaptureError(f"{defn.file}: {defn.custom_entry}() must return a dict of input tensors")
            made.update(got)
        args = []
        for name in order:
            spec = defn.inputs.get(name) or defn.outputs[name]
            src = wl.inputs.get(name)
            where = f"{wl.where}: inputs.{name}"
            if spec.scalar:  # a Python scalar: the workload's value, or what the generator made
                if src.kind == "custom":  # type: ignore[union-attr]
                    if name not in made:
                        raise CaptureError(f"{where}: {defn.custom_entry}() did not return {name!r}")
                    value = made[name]
                    args.append(value.item() if isinstance(value, torch.Tensor) and value.dim() == 0 else value)
                else:
                    args.append(src.value)  # type: ignore[union-attr]
                continue
            dt = torch_dtype(spec, where)
            shape = shape_of(spec, wl.sizes)
            if name in defn.outputs:  # destination-passing style: run(..., out) writes its output
                args.append(torch.zeros(shape, dtype=dt))
            elif src.kind == "scalar":  # type: ignore[union-attr]
                args.append(torch.tensor(src.value, dtype=dt))  # type: ignore[union-attr]
            elif src.kind == "custom":  # type: ignore[union-attr]
                if name not in made:
                    raise CaptureError(f"{where}: {defn.custom_entry}() did not return {name!r}")
                args.append(_check(made[name], spec, shape, dt, f"{where} ({defn.custom_entry})").to(device))
            elif src.kind == "safetensors":  # type: ignore[union-attr]
                args.append(_check(loaded[name], spec, shape, dt, where).to(device))
            else:
                args.append(_random(shape, dt))
        return args

    return make
