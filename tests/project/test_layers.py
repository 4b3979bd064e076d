"""The package's layers, read from every module's imports (ast; nothing is imported).

- No import cycle joins modules of different folders (a cycle inside one folder is that folder's
  business; across folders it makes the layers one).
- ``solar_io/backends`` and ``solar_io/exporters`` import no frontend.
- The core (the top-level ``solar_io/*.py`` modules and ``solar_io/format/``) imports no backend.
- Only ``solar_io/cli/`` imports typer.

An import counts wherever it stands in a module (a function-level import is still a dependency),
except under ``if TYPE_CHECKING:`` (annotations only, never run). ``from pkg import name`` depends on
the module ``pkg.name`` when there is one, else on the package ``pkg``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from paths import ROOT

PKG = ROOT / "solar_io"

# solar_io/__init__.py loads ``bound`` and ``Report`` from the backends on first use (PEP 562
# ``__getattr__`` with importlib, a string the ast does not see): allowed, and named here so that a
# plain import of a backend added to it would still fail the core rule.
LAZY_EXEMPT = {"solar_io"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(ROOT).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    walk(other)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            walk(child)

    walk(tree)
    return found


def imports_of(name: str) -> set[str]:
    """Every module (of any package) that module ``name`` imports, as dotted names."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
            continue
        if node.level:
            base = package.split(".")
            base = base[:len(base) - node.level + 1]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        for a in node.names:
            sub = f"{mod}.{a.name}"
            out.add(sub if sub in MODULES else mod)
    return out


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """{module: the package modules it imports}; read on first use, not when tests are collected."""
    return {m: {d for d in imports_of(m) if d in MODULES and d != m} for m in MODULES}


def folder(name: str) -> str:
    """The folder a module's file lies in (a package's ``__init__`` lies in the package's folder)."""
    return str(MODULES[name].parent.relative_to(ROOT))


def _cycles() -> list[list[str]]:
    """Strongly connected components of the import graph with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        work = [(v, iter(sorted(import_graph()[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(import_graph()[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(import_graph()):
        if v not in index:
            visit(v)
    return out


def test_the_import_reader_sees_relative_lazy_and_type_checking_imports() -> None:
    # A known module: the pipeline imports the traffic model (relative), tiling lazily inside a
    # function, and result.py imports the precision record for annotations only.
    assert "solar_io.backends.traffic.graph" in import_graph()["solar_io.backends.bound"]
    assert "solar_io.backends.tiling.sol" in import_graph()["solar_io.backends.bound"]
    assert "solar_io.backends.roofline.precision" not in import_graph()["solar_io.backends.result"]
    assert len(MODULES) > 50


def test_no_import_cycle_between_folders() -> None:
    bad = [c for c in _cycles() if len({folder(m) for m in c}) > 1]
    assert not bad, "import cycles across folders: " + "; ".join(" <-> ".join(c) for c in bad)


def test_backends_and_exporters_import_no_frontend() -> None:
    bad = [(m, d) for m in MODULES if m.startswith(("solar_io.backends", "solar_io.exporters"))
           for d in imports_of(m) if d == "solar_io.frontends" or d.startswith("solar_io.frontends.")]
    assert not bad, bad


def test_core_imports_no_backend() -> None:
    core = [m for m in MODULES if folder(m) in ("solar_io", "solar_io/format")]
    assert "solar_io.graph" in core and "solar_io.format.codec" in core
    bad = [(m, d) for m in core for d in imports_of(m)
           if (d == "solar_io.backends" or d.startswith("solar_io.backends.")) and m not in LAZY_EXEMPT]
    assert not bad, bad


def test_only_the_cli_imports_typer() -> None:
    bad = [m for m in MODULES if not m.startswith("solar_io.cli")
           and any(d == "typer" or d.startswith("typer.") for d in imports_of(m))]
    assert not bad, bad
