"""AccelForge export and import: determinism, stamps, skips, round trip, and AccelForge itself.

The real-consumer checks run ``tests/accelforge_check.py`` under ``.venv-accelforge``
(Python >= 3.12, built by ``make test``): AccelForge's loader accepts every exported file and
counts the same iteration points per einsum as solar-io; its mapper, on the simple two-level
architecture, reports solar-io's MACs for matmul, conv, MLP and attention, and for a fused
2-matmul chain off-chip traffic without the intermediate.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from test_export_support import CHAIN, GRAPHS, ROOT, SMALL, require_accelforge, run_checks, small_graph
from typer.testing import CliRunner

from solar_io import __version__, graph_metrics, load, loads
from solar_io.cli.main import app
from solar_io.exporters.accelforge import allocate_names, export_accelforge
from solar_io.exporters.accelforge_import import ImportError_, import_accelforge
from solar_io.exporters.common import ExportError, write_exports
from solar_io.metrics import tensor_bytes


def _body(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_every_graph_exports_deterministically_and_stamped(path: Path) -> None:
    g = load(path)
    text = path.read_text()
    sha = hashlib.sha256(text.encode()).hexdigest()
    a = export_accelforge(g, path.stem, sha, arch="h100-sxm")
    b = export_accelforge(load(path), path.stem, sha, arch="h100-sxm")
    assert a == b
    wl = a.files[0].text
    assert wl.startswith(f"# AccelForge workload written by solar-io {__version__}\n")
    assert f"sha256 {sha}" in wl.splitlines()[1]
    assert "{{" not in wl and "{%" not in wl and "{#" not in wl  # AccelForge renders Jinja
    for s in a.skipped:
        assert f"# skipped: {s.node} (" in wl
    assert [f.name for f in a.files] == [f"{path.stem}.workload.yaml", f"{path.stem}.arch.yaml"]


def test_opaque_and_gather_nodes_are_skipped_loudly_or_fail_under_strict() -> None:
    g = load(ROOT / "tests/golden/v1.0/opaque_sparse.yaml")
    r = export_accelforge(g, "o")
    assert [s.node for s in r.skipped] == ["sort"]
    assert "sort (opaque:" in r.warnings("AccelForge")[0]
    with pytest.raises(ExportError, match="--strict.*sort"):
        export_accelforge(g, "o", strict=True)
    dm = export_accelforge(load(ROOT / "tests/golden/v1.0/data_movement.yaml"), "d")
    assert {s.node for s in dm.skipped} == {"embed", "cat"}


def test_padding_and_strides_are_exact() -> None:
    text = export_accelforge(load(ROOT / "examples/graphs/conv2d.yaml"), "c").files[0].text
    assert "    rank_sizes: {H: 58, W: 58}" in text  # padded coordinates: 56 + 1 + 1
    assert "{name: x, projection: {\"N\": \"n\", C: c, H: 2*p + r, W: 2*q + s}}" in text
    assert "persistent_tensors: \"w_2 | b\"" in text  # tensor w renamed: rank variable w exists


def test_names_are_valid_and_distinct() -> None:
    for path in GRAPHS:
        n = allocate_names(load(path))
        ranks = list(n.rank.values())
        assert len(set(ranks)) == len(ranks) and all(r[0].isupper() for r in ranks)
        assert all(v == r.lower() and v[0].islower() for r, v in zip(ranks, n.var.values(), strict=True))
        objs = list(n.tensor.values()) + list(n.einsum.values())
        assert len(set(objs)) == len(objs) and not set(objs) & (set(ranks) | set(n.var.values()))


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_import_round_trip(path: Path) -> None:
    g = load(path)
    first = export_accelforge(g, path.stem).files[0].text
    g2, _ = import_accelforge(first, f"{path.stem}.workload.yaml")
    again = export_accelforge(g2, path.stem).files[0].text
    assert _body(again) == _body(first)
    if not any(n.kind == "opaque" for n in g.nodes) and path.stem != "data_movement":
        assert graph_metrics(g2).macs == graph_metrics(g).macs


def test_import_rejects_what_it_cannot_read() -> None:
    with pytest.raises(ImportError_, match="Jinja"):
        import_accelforge("workload:\n  rank_sizes: {M: {{N}}}\n", "t.yaml")
    with pytest.raises(ImportError_, match="no bound"):
        import_accelforge("workload:\n  bits_per_value: {All: 8}\n  einsums:\n  - \"Z[m] = A[m]\"\n", "t.yaml")


def test_import_einsum_strings_and_unread_set_expressions() -> None:
    text = """workload:
  rank_sizes: {B: 2, M: 8, D: 4, H: 2, E: 2}
  bits_per_value: {All: 8}
  persistent_tensors: weight - Intermediates
  einsums:
  - einsum: "I[b, m, d] = I_in[b, m, d]"
    is_copy_operation: True
  - "V[b, m, h, e] = I[b, m, d] * WV[h, e, d]"
  - "Z[b, m, h] = V[b, m, h, e]"
"""
    g, notes = import_accelforge(text, "strings.yaml")
    assert [n.kind for n in g.nodes] == ["data_movement", "einsum", "einsum"]
    assert graph_metrics(g).macs == 2 * 8 * 2 * 2 * 4
    assert len(notes) == 1 and "weight - Intermediates" in notes[0]


def test_import_a_published_accelforge_example() -> None:
    """AccelForge's own annotated three-matmul workload (shipped with it) imports and bounds."""
    py = require_accelforge()
    found = sorted(py.parents[1].glob("lib/python3*/site-packages/examples/workloads/three_matmuls_annotated.yaml"))
    if not found:
        pytest.skip("this AccelForge release ships no three_matmuls_annotated.yaml example")
    g, _ = import_accelforge(found[0].read_text(), found[0].name)
    assert graph_metrics(g).macs == 3 * 128**3
    assert [t.role for t in g.tensors if t.name.startswith("T")] == ["input", "intermediate", "intermediate", "output"]


def test_cli_export_and_import(tmp_path: Path) -> None:
    runner = CliRunner()
    src = ROOT / "tests/golden/v1.0/opaque_sparse.yaml"
    r = runner.invoke(app, ["export", "accelforge", str(src), "-o", str(tmp_path), "--arch", "h100-sxm"])
    assert r.exit_code == 0, r.output
    assert "sort (opaque" in r.output  # the warning (stderr is mixed into output here)
    wl = tmp_path / "opaque_sparse.workload.yaml"
    assert wl.exists() and (tmp_path / "opaque_sparse.arch.yaml").exists()
    r = runner.invoke(app, ["export", "accelforge", str(src), "-o", str(tmp_path), "--strict"])
    assert r.exit_code != 0
    out = tmp_path / "imported.yaml"
    r = runner.invoke(app, ["import", "accelforge", str(wl), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert load(out).producer.frontend == "accelforge"


def test_cli_evaluate_without_accelforge_says_how_to_install(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("accelforge") is not None:
        pytest.skip("accelforge is importable in this interpreter")
    from solar_io.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["export", "accelforge", str(ROOT / "examples/graphs/matmul.yaml"), "-o", str(tmp_path),
              "--arch", "h100-sxm", "--evaluate"])
    assert e.value.code == 1
    assert (tmp_path / "matmul.workload.yaml").exists()


# --- the real consumer: AccelForge -------------------------------------------------------------


@pytest.fixture(scope="session")  # session: under xdist a module fixture is rebuilt when tests interleave
def accelforge_results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every graph loaded by AccelForge; the small examples and the chain mapped."""
    d = tmp_path_factory.mktemp("accelforge")
    graphs = {p.stem: load(p) for p in GRAPHS}
    mapped = {f"small_{s}": small_graph(s) for s in SMALL} | {"chain": loads(CHAIN)}
    tasks, keys = [], []
    for stem, g in graphs.items():
        write_exports(export_accelforge(g, stem), d)
        tasks.append({"kind": "load", "workload": str(d / f"{stem}.workload.yaml")})
        keys.append(("load", stem))
    for stem, g in mapped.items():
        write_exports(export_accelforge(g, stem, arch="h100-sxm"), d)
        # the examples check counts of work, which no mapping changes: one template per einsum; the
        # chain checks the traffic of the best fused mapping: the mapper's whole (fast) search
        tasks.append({"kind": "map", "workload": str(d / f"{stem}.workload.yaml"),
                      "arch": str(d / f"{stem}.arch.yaml"), "fast": True,
                      "templates": None if stem == "chain" else 1})
        keys.append(("map", stem))
    results = run_checks(tasks, d)
    return {"graphs": graphs | mapped, **{k: r for k, r in zip(keys, results, strict=True)}}


def _points(g) -> dict[str, tuple[int, int]]:  # type: ignore[no-untyped-def]
    """{AccelForge einsum name: (solar-io points, MACs)} of every exported node."""
    names = allocate_names(g)
    ms = {m.name: m for m in graph_metrics(g).nodes}
    skipped = {s.node for s in export_accelforge(g, "x").skipped}
    return {names.einsum[n.name]: (ms[n.name].points, ms[n.name].macs) for n in g.nodes if n.name not in skipped}


def _copies(g) -> set[str]:  # type: ignore[no-untyped-def]
    """AccelForge names of the exported data-movement nodes (copy operations)."""
    names = allocate_names(g)
    return {names.einsum[n.name] for n in g.nodes if n.kind == "data_movement"}


@pytest.mark.xdist_group("accelforge")  # one run of the AccelForge processes (the fixture)
@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_accelforge_loads_every_export_and_counts_the_same_points(accelforge_results: dict, path: Path) -> None:
    r = accelforge_results[("load", path.stem)]
    assert r["ok"], r.get("traceback", r.get("error"))
    want = _points(accelforge_results["graphs"][path.stem])
    assert r["einsums"] == list(want)
    assert r["n_computes"] == {e: p for e, (p, _) in want.items()}


@pytest.mark.xdist_group("accelforge")  # one run of the AccelForge processes (the fixture)
@pytest.mark.parametrize("stem", list(SMALL), ids=str)
def test_accelforge_mapper_reports_solar_io_macs(accelforge_results: dict, stem: str) -> None:
    r = accelforge_results[("map", f"small_{stem}")]
    assert r["ok"], r.get("traceback", r.get("error"))
    g = accelforge_results["graphs"][f"small_{stem}"]
    want = _points(g)
    macs = {e: m for e, (_, m) in want.items() if m}
    assert {e: r["mapped_computes"][e] for e in macs} == macs
    assert sum(r["mapped_computes"][e] for e in macs) == graph_metrics(g).macs
    # Every iteration point of an einsum is one compute; a copy is one too, unless the mapping
    # leaves source and destination in the same memory (a no-op).
    copies = _copies(g)
    assert {e: n for e, n in r["mapped_computes"].items() if e not in copies} == {
        e: p for e, (p, _) in want.items() if e not in copies}
    assert all(r["mapped_computes"][e] in (0, want[e][0]) for e in copies)
    assert r["computes"] == sum(r["mapped_computes"].values())


@pytest.mark.xdist_group("accelforge")  # one run of the AccelForge processes (the fixture)
def test_fused_chain_offchip_traffic_excludes_the_intermediate(accelforge_results: dict) -> None:
    r = accelforge_results[("map", "chain")]
    assert r["ok"], r.get("traceback", r.get("error"))
    g = accelforge_results["graphs"]["chain"]
    bits = {t.name: 8 * tensor_bytes(g, t) for t in g.tensors}
    assert r["computes"] == graph_metrics(g).macs
    assert r["offchip_read_bits"] == bits["A"] + bits["W0"] + bits["W1"]
    assert r["offchip_write_bits"] == bits["Y"]
    assert r["offchip_read_bits"] + r["offchip_write_bits"] == 8 * graph_metrics(g).boundary_bytes


def test_accelforge_checks_skip_only_without_python312(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import test_export_support as support

    monkeypatch.setattr(support, "AF_PYTHON", tmp_path / "missing" / "python")
    monkeypatch.setattr(support.shutil, "which", lambda name: None)
    with pytest.raises(pytest.skip.Exception, match="Python >= 3.12"):
        support.require_accelforge()
    monkeypatch.setattr(support, "python312_available", lambda: True)
    with pytest.raises(pytest.fail.Exception, match="make accelforge-venv"):
        support.require_accelforge()
