"""The chip-independent part of pricing the nodes (:func:`node_facts`, kept per graph, issue 19) prices
every chip as a fresh table does: rows, notes, unpriced work and repriced nodes all equal."""

from __future__ import annotations

from pathlib import Path

import pytest

import solar_io
from solar_io.backends.roofline.bounds import node_facts, price_nodes
from solar_io.backends.roofline.model import PeakModel
from solar_io.backends.roofline.precision import Policy, analyse
from solar_io.backends.traffic import traffic_of
from solar_io.hardware import load_spec

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("path", ["tests/golden/v1.0/all_ops.yaml", "tests/golden/v1.0/opaque_sparse.yaml",
                                  "examples/graphs/attention.yaml"])
def test_kept_facts_price_as_a_fresh_table(path: str) -> None:
    g = solar_io.load(ROOT / path)
    gt = traffic_of(g)
    pplan = analyse(g, gt.metrics, Policy(True, True))
    facts = node_facts(g, gt.metrics, gt.nodes)
    for chip in ("h100-sxm", "l4", "mi300x"):
        spec = load_spec(chip)
        bw = float(spec.dram_bandwidth)
        dram = [tr.bytes * 0.5 for tr in gt.nodes]
        model = PeakModel(spec, True, {})
        kept = price_nodes(g, gt.metrics, model, bw, gt.nodes, dram, pplan, facts)
        assert kept == price_nodes(g, gt.metrics, PeakModel(spec, True, {}), bw, gt.nodes, dram, pplan)
        assert [n.bytes for n in kept.nodes] == [tr.bytes for tr in gt.nodes]
        assert [n.memory_time for n in kept.nodes] == [b / bw for b in dram]
