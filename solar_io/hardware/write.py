"""Writing hardware specs: canonical YAML text and an atomic file write.

>>> from solar_io.hardware import load_spec
>>> dump_spec_yaml(load_spec("l4")).splitlines()[0]
'format: solar-io.hardware'
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from solar_io.format import yamltext
from solar_io.hardware.model import HardwareSpec
from solar_io.hardware.read import spec_from_dict

__all__ = ["dump_spec_yaml", "write_spec"]


def dump_spec_yaml(spec: HardwareSpec) -> str:
    """Canonical YAML text of ``spec`` (the core's deterministic emitter: fixed key order, block
    style, shortest round-trip floats, no anchors)."""
    return yamltext.emit(spec.to_dict())


def write_spec(spec: HardwareSpec, path: str | os.PathLike[str]) -> Path:
    """Write ``spec`` as YAML to ``path`` atomically (temporary file in the same folder, then rename)."""
    target = Path(path)
    text = dump_spec_yaml(spec)
    spec_from_dict(yamltext.parse(text), str(target))  # never write a file we would refuse to read
    target.parent.mkdir(parents=True, exist_ok=True)
    real = Path(os.path.realpath(target))  # a symlink is written through, not replaced
    try:
        mode = real.stat().st_mode & 0o7777  # an existing file keeps its mode
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask  # a new file: what open() would give (mkstemp makes 0600)
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
