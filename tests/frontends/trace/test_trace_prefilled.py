"""A definition's outputs arrive zero-filled, as SOL-ExecBench's harness hands them (format 1.8 ``prefilled``).

The definition is an embedding gradient written for the test: ``table = zeros(V=64, D=8) fp32;
table.index_add_(0, ids, grad.float()); return table.bf16()`` with S = 5 distinct ids. By hand: grad 5 x 8 bf16
= 80 B and ids 5 int64 = 40 B are read; zero-filled, the output's 5 scattered rows (5 x 8 bf16, 80 B) are
written; as new memory (``--fresh-outputs``) all 64 rows (1,024 B).
"""

from __future__ import annotations

import json
from pathlib import Path

from inprocess import run_main

import solar_io

EMBED_GRAD = {
    "name": "embedding_grad_v64", "custom_inputs_entrypoint": "make_inputs",
    "axes": {"S": {"type": "var"}, "V": {"type": "const", "value": 64}, "D": {"type": "const", "value": 8}},
    "inputs": {"ids": {"shape": ["S"], "dtype": "int64"}, "grad": {"shape": ["S", "D"], "dtype": "bfloat16"}},
    "outputs": {"grad_table": {"shape": ["V", "D"], "dtype": "bfloat16"}},
    "reference": ("import torch\n\ndef make_inputs(axes_and_scalars, device):\n"
                  "    S = axes_and_scalars['S']\n"
                  "    return {'ids': torch.randperm(64, device=device)[:S],\n"
                  "            'grad': torch.randn(S, 8, dtype=torch.bfloat16, device=device)}\n\n"
                  "def run(ids, grad):\n"
                  "    table = torch.zeros(64, 8, dtype=torch.float32, device=grad.device)\n"
                  "    table.index_add_(0, ids, grad.float())\n"
                  "    return table.to(torch.bfloat16)\n"),
}
LINE = {"uuid": "s5", "axes": {"S": 5}, "inputs": {"ids": {"type": "custom"}, "grad": {"type": "custom"}}}


def _problem(tmp: Path, definition: dict) -> Path:
    d = tmp / definition["name"]
    d.mkdir(parents=True)
    (d / "definition.json").write_text(json.dumps(definition))
    (d / "workload.jsonl").write_text(json.dumps(LINE) + "\n")
    return d


def test_outputs_arrive_zero_filled_and_only_scattered_rows_are_charged(tmp_path):
    d = _problem(tmp_path, EMBED_GRAD)
    r = run_main("capture", str(d), "-o", str(tmp_path / "zeroed"))
    assert r.returncode == 0, r.stderr
    g = solar_io.load(tmp_path / "zeroed" / "embedding_grad_v64.s5.yaml")
    (out,) = [t for t in g.tensors if t.role == "output"]
    assert out.prefilled == 0.0 and g.validation.status == "passed"
    (why,) = [a for a in g.assumptions if a.kind == "prefilled_outputs"]
    assert dict(why.values) == {"outputs": (out.name,)}
    assert solar_io.graph_metrics(g).boundary_bytes == 80 + 40 + 80
    assert solar_io.bound(g, "b200@1500MHz").fused.bytes == 200
    r = run_main("capture", str(d), "-o", str(tmp_path / "fresh"), "--fresh-outputs")
    assert r.returncode == 0, r.stderr
    fresh = solar_io.load(tmp_path / "fresh" / "embedding_grad_v64.s5.yaml")
    assert all(t.prefilled is None for t in fresh.tensors)
    assert not [a for a in fresh.assumptions if a.kind == "prefilled_outputs"]
    assert solar_io.graph_metrics(fresh).boundary_bytes == 80 + 40 + 1024


def test_an_output_the_reference_takes_as_a_destination_is_not_prefilled(tmp_path):
    """``run(ids, grad, grad_table)`` writes the output handed to it: the graph's output updates that input (its
    memory), so it is in place, not prefilled; the capture writes no prefilled assumption for it."""
    doc = dict(EMBED_GRAD, name="embedding_grad_dps", reference=EMBED_GRAD["reference"].replace(
        "def run(ids, grad):\n    table = torch.zeros(64, 8, dtype=torch.float32, device=grad.device)\n"
        "    table.index_add_(0, ids, grad.float())\n    return table.to(torch.bfloat16)\n",
        "def run(ids, grad, grad_table):\n    grad_table.index_add_(0, ids, grad)\n"))
    d = _problem(tmp_path, doc)
    r = run_main("capture", str(d), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    g = solar_io.load(tmp_path / "out" / "embedding_grad_dps.s5.yaml")
    assert [t.updates for t in g.tensors if t.role == "output"] == ["grad_table"]
    assert all(t.prefilled is None for t in g.tensors)


def test_fresh_outputs_is_for_definitions_only(tmp_path):
    model = tmp_path / "m.py"
    model.write_text("import torch\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
                     "def get_inputs():\n    return (torch.ones(4),)\n")
    r = run_main("capture", str(model), "--fresh-outputs")
    assert r.returncode != 0
    assert "--fresh-outputs applies to benchmark definitions" in r.stderr and len(r.stderr.strip().splitlines()) == 1


MASK_FILL = {
    "name": "mask_fill", "axes": {"N": {"type": "var"}},
    "inputs": {"x": {"shape": ["N"], "dtype": "float32"}}, "outputs": {"q": {"shape": ["N"], "dtype": "float32"}},
    "reference": ("import torch\n\ndef run(x):\n    q = torch.zeros_like(x)\n    q[x > 0] = 1.0\n"
                  "    q[x < -1] = 2.0\n    return q\n"),
}


def test_masked_writes_into_a_zero_filled_output_charge_none_of_the_fill(tmp_path):
    """``q = zeros_like(x); q[x > 0] = 1; q[x < -1] = 2; return q`` with N = 64 fp32: x is read (256 B). The
    masks select a count the file does not know (none to all), so in memory handed in zeroed nothing of q need
    be written; as new memory, eager's fill writes all of it (256 B)."""
    d = tmp_path / "mask_fill"
    d.mkdir()
    (d / "definition.json").write_text(json.dumps(MASK_FILL))
    (d / "workload.jsonl").write_text(json.dumps({"uuid": "n64", "axes": {"N": 64},
                                                  "inputs": {"x": {"type": "random"}}}) + "\n")
    for flags, written in (((), 0), (("--fresh-outputs",), 256)):
        out = tmp_path / f"out{len(flags)}"
        r = run_main("capture", str(d), "-o", str(out), *flags)
        assert r.returncode == 0, r.stderr
        g = solar_io.load(out / "mask_fill.n64.yaml")
        assert g.validation.status == "passed" and any(a.kind == "masked_fill" for a in g.assumptions)
        rep = solar_io.bound(g, "h100-pcie", cache_aware=True)
        assert solar_io.graph_metrics(g).boundary_bytes == rep.fused.bytes == rep.cache_aware.bytes == 256 + written
        assert rep.unfused.bytes == 256 + written
        assert bool(written) != bool([n for n in rep.notes if n.startswith("prefilled: output")])
