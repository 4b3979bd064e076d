"""benchmarks/sol_execbench_export.py on a fake of the rocm mirror's files, written here by hand in a
throw-away bare git repository (issue 17): the definition from dataset-meta.json (in an older commit
only, as in the real mirror), the workload lines, the input generator's name, every skip reason, the
packet cross-check, and that the exported folder parses as a FlashInfer-Trace problem."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from solar_io.frontends.trace.definition import read_definition
from solar_io.frontends.trace.workload import BadLine, read_workloads

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")

REF_CUSTOM = ("import torch\n\ndef gen_inputs(axes_and_scalars, device):\n"
              "    n = axes_and_scalars['n']\n    return {'x': torch.ones(n, device=device)}\n\n"
              "def run(x, eps):\n    return x * eps\n")
REF_PLAIN = "import torch\n\ndef run(a, b):\n    return a @ b\n"


def _module():
    spec = importlib.util.spec_from_file_location("sol_execbench_export",
                                                  ROOT / "benchmarks" / "sol_execbench_export.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _entry(name, axes, inputs, reference, workloads):
    return {"name": name, "description": f"{name} by hand", "hf_id": None, "axes": axes, "inputs": inputs,
            "outputs": {"y": {"shape": list(next(iter(inputs.values()))["shape"] or []), "dtype": "float32"}},
            "reference": reference, "workloads": [{"uuid": w["uuid"], "axes": w["axes"]} for w in workloads]}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


def _write(root: Path, rel: str, text: str) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


def _fake_mirror(tmp: Path) -> tuple[Path, dict]:
    work = tmp / "work"
    work.mkdir()
    _git(work, "init", "-q")
    scale = [  # L1/001: custom tensor input + a scalar with its value; line 3 names an undeclared input
        {"uuid": "u1", "axes": {"n": 4}, "inputs": {"x": {"type": "custom"}, "eps": {"type": "scalar", "value": 0.5}},
         "tolerance": {"max_atol": 1e-3}},
        {"uuid": "u2", "axes": {"n": 8}, "inputs": {"x": {"type": "custom"}, "eps": {"type": "scalar"}}},
        {"uuid": "u3", "axes": {"n": 8}, "inputs": {"x": {"type": "custom"}, "eps": {"type": "scalar", "value": 1},
                                                    "bias": {"type": "random"}}},
    ]
    mm = [  # Quant/002: random tensors; line 2 reads a safetensors blob (absent)
        {"uuid": "m1", "axes": {"M": 2}, "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}},
        {"uuid": "m2", "axes": {"M": 3}, "inputs": {"a": {"type": "safetensors", "path": "data/blob/a.safetensors",
                                                          "tensor_key": "a"}, "b": {"type": "random"}}},
    ]
    bad = [{"uuid": "z1", "axes": {"n": 2}, "inputs": {"x": {"type": "custom"}}}]  # custom, but no generator
    meta = {"problems": {
        "L1__001_scale": _entry("001_scale", {"n": {"type": "var"}},
                                {"x": {"shape": ["n"], "dtype": "float32"}, "eps": {"shape": None, "dtype": "float32"}},
                                REF_CUSTOM, scale),
        "Quant__002_mm": _entry("002_mm", {"M": {"type": "var"}, "K": {"type": "const", "value": 4}},
                                {"a": {"shape": ["M", "K"], "dtype": "float32"},
                                 "b": {"shape": ["K", "M"], "dtype": "float32"}}, REF_PLAIN, mm),
        "L2__003_nogen": _entry("003_nogen", {"n": {"type": "var"}}, {"x": {"shape": ["n"], "dtype": "float32"}},
                                "def run(x):\n    return x\n", bad),
        "L2__004_mismatch": _entry("004_mismatch", {"n": {"type": "var"}},
                                   {"x": {"shape": ["n"], "dtype": "float32"}}, "def run(x):\n    return x\n",
                                   [{"uuid": "q1", "axes": {"n": 5}}]),
    }}
    _write(work, "reference/dataset-meta.json", json.dumps(meta))
    _write(work, "reference/nvidia-b200/published.json", json.dumps({"kernels": {"Quant__002_mm": {"workloads": [
        {"axes": {"M": 2, "K": 4}, "sol_ms": 1e-4, "baseline_latency_ms": 2e-3}]}}}))
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "meta")
    _git(work, "rm", "-q", "-r", "reference")  # as in the real mirror: gone from HEAD, kept in history
    other_axes = [{"uuid": "q1", "axes": {"n": 6}, "inputs": {"x": {"type": "random"}}}]  # meta says n=5
    for sub, name, lines in (("L1", "001_scale", scale), ("Quant", "002_mm", mm), ("L2", "003_nogen", bad),
                             ("L2", "004_mismatch", other_axes)):
        _write(work, f"artifacts/05/workloads/{sub}/{name}/workload.jsonl",
               "".join(json.dumps(x) + "\n" for x in lines))
    packet = {k: v for k, v in meta["problems"]["Quant__002_mm"].items() if k != "workloads"}
    packet = {"name": packet["name"], "description": packet["description"], "hf_id": None,
              "custom_inputs_entrypoint": None, **{k: packet[k] for k in ("axes", "inputs", "outputs", "reference")}}
    _write(work, "artifacts/10/runs/r1/agent/Quant__002_mm/packet/definition.json", json.dumps(packet, indent=1))
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "workloads")
    bare = tmp / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, capture_output=True)
    return bare, meta


def test_export_rebuilds_definitions_and_lines_and_skips_what_the_mirror_cannot_run(tmp_path):
    mod = _module()
    bare, meta = _fake_mirror(tmp_path)
    out = tmp_path / "corpus"
    ex = mod.export(bare, out)

    assert (ex.problems, ex.workloads) == (4, 7)
    assert (ex.exported_problems, ex.exported_workloads) == (2, 2)
    skipped = {(s["problem"], s["uuid"]): s["reason"] for s in ex.skipped_workloads}
    assert set(skipped) == {("L1/001_scale", "u2"), ("L1/001_scale", "u3"), ("Quant/002_mm", "m2")}
    assert skipped[("L1/001_scale", "u2")] == "input eps: scalar without a value"
    assert "undeclared: bias" in skipped[("L1/001_scale", "u3")]
    assert "safetensors blob 'data/blob/a.safetensors'" in skipped[("Quant/002_mm", "m2")]
    probs = {s["problem"]: s["reason"] for s in ex.skipped_problems}
    assert set(probs) == {"L2/003_nogen", "L2/004_mismatch"}
    assert "no single function (axes_and_scalars, device)" in probs["L2/003_nogen"]
    assert "uuids or axes differ" in probs["L2/004_mismatch"]
    assert ex.packets == {"compared": 1, "agree": 1, "differ": []}
    assert not (out / "L2").exists()

    d = json.loads((out / "L1/001_scale/definition.json").read_text())
    assert list(d)[:4] == ["name", "description", "hf_id", "custom_inputs_entrypoint"]
    assert d["custom_inputs_entrypoint"] == "gen_inputs" and d["reference"] == REF_CUSTOM
    assert (out / "L1/001_scale/reference.py").read_text() == REF_CUSTOM
    assert json.loads((out / "Quant/002_mm/definition.json").read_text())["custom_inputs_entrypoint"] is None
    lines = (out / "L1/001_scale/workload.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [{"uuid": "u1", "axes": {"n": 4}, "inputs": {
        "x": {"type": "custom"}, "eps": {"type": "scalar", "value": 0.5}}, "tolerance": {"max_atol": 1e-3}}]
    pub = json.loads((out / "published.json").read_text())
    assert pub["kernels"]["Quant__002_mm"]["workloads"][0]["sol_ms"] == 1e-4
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["sources"]["definitions"].startswith("reference/dataset-meta.json@")
    assert len(manifest["skipped_workloads"]) == 3

    # the exported folder is a FlashInfer-Trace problem the trace frontend reads
    defn = read_definition(out / "L1/001_scale/definition.json")
    assert defn.custom_entry == "gen_inputs" and defn.scalars == ("eps",)
    (wl,) = read_workloads(out / "L1/001_scale/workload.jsonl", defn)
    assert not isinstance(wl, BadLine) and wl.sizes["n"] == 4 and wl.uuid == "u1"


def test_a_mirror_without_dataset_meta_is_one_error(tmp_path):
    mod = _module()
    work = tmp_path / "w"
    work.mkdir()
    _git(work, "init", "-q")
    _write(work, "README.md", "x")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "x")
    with pytest.raises(mod.ExportError, match="dataset-meta.json is in no commit"):
        mod.export(work / ".git", tmp_path / "out")
