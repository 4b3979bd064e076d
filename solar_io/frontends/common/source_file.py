"""A user's file as a module, compiled from its source every time: no ``__pycache__`` beside it.

Python's own file loader keeps a compiled copy of each module in ``__pycache__`` and trusts it while
the source's modification time (whole seconds) and size are unchanged. A model file edited and
captured again within one second, to the same size (``Tensor("B,M")`` to ``Tensor("B,C")``), would
then run the old code; and capture would leave a ``__pycache__`` folder in the user's model
folder. :func:`file_spec` gives a module spec whose loader compiles the file from source on every
load and writes nothing.

>>> import importlib.util, pathlib, tempfile
>>> p = pathlib.Path(tempfile.mkdtemp()) / "m.py"
>>> _ = p.write_text("x = 1\\n")
>>> spec = file_spec("m_example", p)
>>> mod = importlib.util.module_from_spec(spec)
>>> spec.loader.exec_module(mod)
>>> mod.x, (p.parent / "__pycache__").exists()
(1, False)
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import CodeType


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """:class:`~importlib.machinery.SourceFileLoader` that neither reads nor writes bytecode caches."""

    def get_code(self, fullname: str) -> CodeType:
        return self.source_to_code(self.get_data(self.path), self.path)


def file_spec(name: str, path: Path) -> importlib.machinery.ModuleSpec | None:
    """The spec of module ``name`` from the Python file ``path`` (None where it cannot be one), loaded by
    :class:`SourceOnlyLoader`."""
    return importlib.util.spec_from_file_location(name, path, loader=SourceOnlyLoader(name, str(path)))


__all__ = ["SourceOnlyLoader", "file_spec"]
