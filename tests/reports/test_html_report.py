"""The HTML report: self-contained, one roofline point and one table row per node, headroom when measured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from paths import ROOT

from solar_io import bound, load
from solar_io.backends.roofline.report import document
from solar_io.cli.main import main
from solar_io.reports.html import Point, roofline_svg, sol_report_html


def run(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


def self_contained(page: str) -> None:
    """No reference that would reach a network or another file (the SVG namespace is a name, not a fetch)."""
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", page)
    assert "@import" not in page and "url(" not in page
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page)) - {"http://www.w3.org/2000/svg",
                                                             "http://www.w3.org/1999/xlink"}
    assert not urls, urls


def test_page_has_one_point_and_row_per_node_and_the_headroom() -> None:
    g = load(ROOT / "examples/graphs/attention.yaml")
    r = bound(g, "h100-sxm", measured="1ms", target_latency="1us", cache_aware=True)
    page = sol_report_html(document([r]))
    self_contained(page)
    svg = page[page.index('<svg class="roofline"'):]
    svg = svg[:svg.index("</svg>")]
    assert svg.count("<circle") == len(g.nodes)
    names = re.findall(r'data-name="([^"]+)"', svg)
    assert sorted(names) == sorted(n.name for n in g.nodes)
    body = page[page.index('id="nodes-0"'):]
    assert body[:body.index("</tbody>")].count("<tr id=") == len(g.nodes)
    # headroom = measured / SOL, per fidelity, as printed by bound
    for f in (r.unfused, r.fused, r.cache_aware):
        assert f.headroom == pytest.approx(1e-3 / f.time)
        assert f"{f.headroom:.3g}x" in page
    assert "Inverse roofline" in page and "target latency 1 µs" in page


def test_roofline_places_points_by_intensity_and_rate() -> None:
    pts = [Point("lo", "lo", 1e9, 1e9, 1e-3), Point("hi", "hi", 1e12, 1e9, 1e-3), Point("move", "move", 0, 1e9, 1e-3)]
    svg = roofline_svg(pts, [("matrix/bf16", 1e15)], 1e12)
    xy = {m[2]: (float(m[0]), float(m[1])) for m in
          re.findall(r'<circle[^>]*cx="([\d.]+)" cy="([\d.]+)"[^>]*data-name="(\w+)"', svg)}
    assert xy["hi"][0] > xy["lo"][0]  # 1000 FLOP/B right of 1 FLOP/B
    assert xy["hi"][1] < xy["lo"][1]  # 1 PFLOP/s above 1 TFLOP/s (SVG y grows downwards)
    assert 'class="edge"' in svg and svg.count("<circle") == 3  # the FLOP-less node is drawn on the axis


def test_cli_format_html_and_html_beside_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = str(ROOT / "examples/graphs/mlp.yaml")
    out = tmp_path / "report.html"
    assert run(["bound", src, "--hw", "h100-sxm,b200", "--format", "html", "-o", str(out), "--no-cache-aware"]) == 0
    page = out.read_text()
    self_contained(page)
    assert page.count('<svg class="roofline"') == 2 and "b200" in page
    extra = tmp_path / "extra.html"
    assert run(["bound", src, "--hw", "h100-sxm", "--top", "2", "--html", str(extra), "--no-cache-aware"]) == 0
    captured = capsys.readouterr()
    assert "Speed of light" in captured.out and "HTML report written" in captured.err
    assert extra.read_text().count("<circle") >= 5  # every node on the page, whatever --top shows


def test_report_repr_html_for_jupyter() -> None:
    r = bound(load(ROOT / "examples/graphs/mlp.yaml"), "h100-sxm")
    page = r._repr_html_()
    assert page.count("<circle") == 5 and "<table" in page


def test_folder_report_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / "mm.py").write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n\n"
        "def get_inputs():\n    return [torch.randn(64, 32), torch.randn(32, 16)]\n")
    out = tmp_path / "report"
    assert run(["report", str(models), "-o", str(out), "--hw", "h100-sxm", "--no-measure", "--no-plot",
                "--html"]) == 0
    assert "report.html" in capsys.readouterr().out
    page = (out / "report.html").read_text()
    self_contained(page)
    body = page[page.index('id="models"'):]
    assert body[:body.index("</tbody>")].count("<tr id=") == 1 and ">mm<" in body
    # one point per fidelity computed (no measured run): unfused, fused, cache-aware
    assert page.count('data-name="mm"') == 3
