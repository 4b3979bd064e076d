"""solar-io graph: DOT, Mermaid, GraphML and SVG pictures, colours from a bound, collapsed blocks."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import networkx as nx
import pytest
from paths import ROOT
from test_graph_dag import _layers

from solar_io import bound, load, loads
from solar_io.cli.main import main
from solar_io.graphs import picture
from solar_io.graphs.dag import dag
from solar_io.graphs.picture import build, to_dot, to_graphml, to_mermaid


def run(args: list[str]) -> int:
    """The exit code of ``solar-io ARGS`` run in this process."""
    try:
        main(args)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def test_picture_colours_each_node_by_its_bottleneck() -> None:
    g = load(ROOT / "examples/graphs/mlp.yaml")
    r = bound(g, "h100-sxm")
    pic = build(g, r)
    want = {n.name: n.bottleneck for n in r.nodes}
    assert {v.id: v.bottleneck for v in pic.vertices.values()} == want
    assert want["fc1"] == "matrix"  # 2*512*1024*4096 FLOPs over 4 MiB + 8 MiB + ...: compute-bound
    dot = to_dot(pic)
    for n in g.nodes:
        assert f'"{n.name}" [label=' in dot
        assert picture.COLOURS[want[n.name]] in dot.split(f'"{n.name}" [label=')[1].split("\n")[0]
    # tensor names and sizes on the edges: h is [512, 4096] bf16
    assert '"fc1" -> "fc1_bias" [label="h\\n4.19 MB"]' in dot


def test_graphml_round_trips_the_edges_and_bytes() -> None:
    g = load(ROOT / "examples/graphs/attention.yaml")
    pic = build(g)
    back = nx.read_graphml(io.BytesIO(to_graphml(pic).encode()))
    d = dag(g)
    assert set(back.edges) == set(d.edges)
    for u, v in d.edges:
        assert back.edges[u, v]["bytes"] == pytest.approx(d.edges[u, v]["bytes"])


def test_repeated_blocks_collapse_to_one_box() -> None:
    g = loads(_layers(6))
    pic = build(g)
    assert "collapsed" in pic.vertices and "6" in pic.clusters["block1"]
    assert set(pic.vertices) == {"add_0", "relu_0", "collapsed", "head"}
    assert ("relu_0", "collapsed") in pic.edges and ("collapsed", "head") in pic.edges
    full = build(g, expand=True)
    assert len(full.vertices) == len(g.nodes) and "collapsed" not in full.vertices
    mmd = to_mermaid(pic)
    assert mmd.startswith("flowchart TD\n") and "blocks 2-6: 5 more x block 1 (10 nodes)" in mmd
    assert mmd.count("-->") == len(pic.edges)


def test_cli_graph_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = str(ROOT / "examples/graphs/mlp.yaml")
    for suffix in ("dot", "graphml", "mmd"):
        out = tmp_path / f"g.{suffix}"
        assert run(["graph", src, "-o", str(out)]) == 0 and out.stat().st_size > 0
    out_lines = capsys.readouterr().out.splitlines()
    assert len(out_lines) == 3 and all("5 boxes, 4 edges" in line for line in out_lines)
    assert run(["graph", src, "-o", str(tmp_path / "g.png")]) == 1
    assert "unknown picture format" in capsys.readouterr().err


def test_svg_needs_dot_and_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(picture.shutil, "which", lambda name: None)
    code = run(["graph", str(ROOT / "examples/graphs/mlp.yaml"), "-o", str(tmp_path / "g.svg")])
    err = capsys.readouterr().err
    assert code == 1 and "apt-get install graphviz" in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not installed (apt-get install graphviz)")
def test_svg_through_dot(tmp_path: Path) -> None:
    out = tmp_path / "g.svg"
    assert run(["graph", str(ROOT / "examples/graphs/mlp.yaml"), "--hw", "h100-sxm", "-o", str(out)]) == 0
    svg = out.read_text()
    assert svg.lstrip().startswith("<svg") and svg.count('class="node"') == 5


def test_demo_model_small_twin_has_two_identical_blocks() -> None:
    """The demo's decoder (examples/models/llama3_8b.py) at two layers: the blocks found are its layers, and
    the head projects the last position only (a prefill step)."""
    pytest.importorskip("torch")
    from solar_io.frontends.select import capture
    from solar_io.graphs.blocks import repeated_blocks
    from solar_io.metrics import graph_metrics

    path = ROOT / "examples/models/llama3_8b.py"
    g = capture(path, "torch", entry=f"{path}:Small", inputs=["ids=int64[1,64]"])
    assert g.validation.status == "passed"
    b = repeated_blocks(g)
    assert b is not None and b.repeats == 2
    one, two = b.block(0), b.block(1)
    assert [g.node_map[n].op for n in one] == [g.node_map[n].op for n in two]
    # MACs by hand: per layer q,o (64x64) + k,v (64x32) + gate,up,down (64x160) per token, attention
    # q.k and p.v (4 heads x 64 x 64 x 16, the causal mask multiplies all), head 64 -> 256 for one token.
    # The head reads the last position only, so the second layer computes q, o, the MLP and attention for
    # that one query (live_work); its k and v serve all 64 positions.
    per_token = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 160
    attention = 2 * 4 * 64 * 64 * 16
    last = 64 * 2 * 64 * 32 + (2 * 64 * 64 + 3 * 64 * 160) + 2 * 4 * 1 * 64 * 16
    assert graph_metrics(g).macs == 64 * per_token + attention + last + 64 * 256
