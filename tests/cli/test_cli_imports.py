"""What ``solar-io bound`` imports (issue 19): only the command it runs, no frontend, plotting, graph or
ILP library it does not use, and one hardware spec validated; the full app still lists every command."""

from __future__ import annotations

import subprocess
import sys

from paths import ROOT

from solar_io.cli.main import _MODULES, _command_of, build_app

GRAPH = ROOT / "examples/graphs/mlp.yaml"

NOT_FOR_BOUND = ("torch", "jax", "matplotlib", "networkx", "pulp", "solar_io.frontends",
                 "solar_io.cli.capture", "solar_io.cli.export", "solar_io.cli.sweep", "solar_io.cli.tiling",
                 "solar_io.cli.reorder_diff", "solar_io.cli.measure", "solar_io.cli.report", "solar_io.cli.graph",
                 "solar_io.cli.hardware", "solar_io.exporters", "solar_io.dse", "solar_io.executor")

PROBE = r"""
import contextlib, io, sys
from solar_io.cli.main import main
from solar_io.hardware import catalog
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(sys.argv[1:])
    except SystemExit as e:
        assert not e.code, e.code
assert "SOL" in out.getvalue() or "Speed of light" in out.getvalue(), out.getvalue()[:500]
print("catalog", catalog._catalog.cache_info().currsize, "shipped", catalog._shipped.cache_info().currsize)
print("\n".join(sorted(sys.modules)))
"""


def _modules(*args: str) -> tuple[str, list[str]]:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    head, *mods = r.stdout.splitlines()
    return head, mods


def test_bound_imports_only_what_it_uses() -> None:
    head, mods = _modules("bound", str(GRAPH), "--hw", "h100-sxm")
    assert head == "catalog 0 shipped 1"  # the spec asked for is the only one validated
    loaded = [m for m in mods if any(m == x or m.startswith(x + ".") for x in NOT_FOR_BOUND)]
    assert loaded == [], loaded
    assert "solar_io.cli.bound" in mods and "solar_io.backends.tiling.partition" in mods  # it did run the bound


def test_the_command_line_picks_one_command_or_all() -> None:
    assert _command_of(["bound", "g.yaml"]) == "bound"
    assert _command_of(["--debug", "-q", "hw", "list"]) == "hw"
    assert _command_of(["check", "g.yaml"]) == "check"
    assert _command_of(["--help"]) is None and _command_of([]) is None and _command_of(["bogus"]) is None
    assert _command_of(["--version"]) is None


def test_the_full_app_has_every_command_in_help_order() -> None:
    app = build_app()
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    groups = [g.name for g in app.registered_groups]
    expected = [n for n, (_, _, kind) in _MODULES.items() if kind == "command"] + ["check", "fmt", "info", "migrate"]
    assert names == expected
    assert groups == [n for n, (_, _, kind) in _MODULES.items() if kind != "command"]
    only = build_app("bound")
    assert [c.name for c in only.registered_commands] == ["bound"] and not only.registered_groups


GC_PROBE = r"""
import atexit, gc, os, sys
from solar_io.cli.main import main
try:
    main(["check", sys.argv[1]])
except SystemExit:
    pass
print("main(argv)", gc.isenabled())
exit_now = os._exit
os._exit = lambda status: (print("entry point", gc.isenabled(), status, flush=True), exit_now(status))
atexit.register(lambda: print("teardown ran"))
sys.argv = ["solar-io", "check", sys.argv[1]]
main()
"""


def test_bound_and_check_run_without_the_collector_and_teardown_only_as_the_process_entry_point() -> None:
    """``main()`` (the console script, ``python -m solar_io``) runs ``bound`` and ``check`` with the cyclic
    collector off and ends the process without the interpreter's teardown (``os._exit`` with the command's
    status, output flushed); ``main(argv)`` inside a longer process leaves the collector on and returns."""
    for graph, status in ((GRAPH, 0), (ROOT / "no-such-graph.yaml", 1)):
        r = subprocess.run([sys.executable, "-c", GC_PROBE, str(graph)], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == status, r.stderr[-2000:]
        states = [line for line in r.stdout.splitlines() if line.startswith(("main(argv)", "entry point", "teardown"))]
        assert states == ["main(argv) True", f"entry point False {status}"], r.stdout
        assert ("no-such-graph.yaml: (document): cannot read" in r.stdout + r.stderr) == bool(status), r.stderr
