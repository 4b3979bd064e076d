"""Write the SOL-ExecBench corpus in its official folder layout from a git mirror of
williamqwu/sol-execbench-rocm (nothing of it is vendored: the mirror is read at run time).

    .venv/bin/python benchmarks/sol_execbench_export.py MIRROR_GIT_DIR OUT_DIR

What the mirror holds and where (found by path in its history, newest commit that has the file):

- ``reference/dataset-meta.json`` (added in 81925d12): every problem's definition verbatim (name,
  description, hf_id, axes, inputs, outputs, the ``reference`` program), keyed ``<subset>__<name>``,
  and each problem's workload uuids and axes; no ``custom_inputs_entrypoint`` and no workload inputs.
- ``artifacts/05/workloads/<subset>/<name>/workload.jsonl``: every workload line (uuid, axes, inputs
  with their kind and scalar values, tolerance). The tolerances there are the rocm project's own
  (its commit 639aee64: "3690/3957 AMD-derived"), not necessarily the dataset's: kept, used only in
  the validation record.
- ``reference/nvidia-b200/published.json`` (c1f88417): NVIDIA's per-workload B200 ``sol_ms`` and
  ``baseline_latency_ms``, copied to ``OUT_DIR/published.json`` for ``sol_execbench.py --published``.
- ``artifacts/10/runs/*/*/<subset>__<name>/packet/definition.json``: some problems in the official
  layout, as the dataset gave them to agents; used only as an independent check of the rebuilt
  definitions (the count that agree is written to the manifest).

Written: ``OUT_DIR/<subset>/<name>/{definition.json, workload.jsonl, reference.py}`` and
``OUT_DIR/export.json`` (sources, counts, every skipped workload or problem with its reason).

Reconstruction rules (each one written into the manifest too):

- ``custom_inputs_entrypoint`` is null (as in the packets) unless a workload line has an input of
  type ``custom``; then it names the reference's one top-level function, other than ``run``, whose parameters are
  ``(axes_and_scalars, device)`` (``get_inputs`` in most problems, ``gen_inputs`` in two). None or
  several such functions: the problem is skipped.
- A workload line is written verbatim unless it cannot be run from the mirror: a ``scalar`` input
  without a ``value``, a ``safetensors`` input (no blob is in the mirror), or an input the definition
  does not declare (or a declared one it does not give). Those lines are skipped and counted, never
  filled in. A workload file whose uuids and axes differ from dataset-meta.json's fails its problem.

Example (a fake mirror is built in tests/frontends/trace/test_sol_execbench_export.py)::

    $ python benchmarks/sol_execbench_export.py /work/.mirror/williamqwu+sol-execbench-rocm/repo /tmp/sxb
    235 problems, 3957 workloads in the mirror: exported 3637 workloads of 225 problems; skipped 320
    workloads (304 safetensors blob; 16 inputs differ) and 10 problems; definitions equal to the
    dataset's packets: 31 of 31
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

META = "reference/dataset-meta.json"
PUBLISHED = "reference/nvidia-b200/published.json"
WORKLOADS = "artifacts/05/workloads/{subset}/{name}/workload.jsonl"
PACKETS = "artifacts/10/runs/"
#: definition.json's keys in the order the dataset's own files use (the packets).
KEY_ORDER = ("name", "description", "hf_id", "custom_inputs_entrypoint", "axes", "inputs", "outputs",
             "reference")


class ExportError(Exception):
    """The mirror lacks a file the export needs, or a file in it is not what this script reads."""


class Mirror:
    """Files of a bare git repository by (commit, path); one ``git cat-file --batch`` reads them all."""

    def __init__(self, git_dir: Path):
        self.git_dir = str(git_dir)
        self._batch: subprocess.Popen | None = None

    def _git(self, *args: str) -> str:
        r = subprocess.run(["git", "--git-dir", self.git_dir, *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise ExportError(f"{self.git_dir}: git {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def newest(self, path: str) -> str | None:
        """The newest commit (any branch) at which ``path`` exists, or None."""
        for commit in self._git("log", "--all", "--format=%H", "--", path).split():
            if self.read(commit, path) is not None:
                return commit
        return None

    def paths(self, commit: str, prefix: str) -> list[str]:
        return [p for p in self._git("ls-tree", "-r", "--name-only", commit, "--", prefix).splitlines() if p]

    def read(self, commit: str, path: str) -> str | None:
        """The file's text at ``commit``, or None where it is absent."""
        if self._batch is None:
            self._batch = subprocess.Popen(["git", "--git-dir", self.git_dir, "cat-file", "--batch"],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._batch.stdin and self._batch.stdout
        self._batch.stdin.write(f"{commit}:{path}\n".encode())
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().decode().split()
        if len(header) != 3:  # "<spec> missing"
            return None
        data = self._batch.stdout.read(int(header[2]))
        self._batch.stdout.read(1)  # the newline after the object
        return data.decode("utf-8")

    def close(self) -> None:
        if self._batch is not None:
            self._batch.communicate()
            self._batch = None


def input_entrypoint(reference: str) -> str | None:
    """The reference's custom input generator: its one top-level function other than ``run`` taking
    ``(axes_and_scalars, device)``; None where there is not exactly one.

    >>> input_entrypoint("def gen_inputs(axes_and_scalars, device):\\n    pass\\ndef run(x):\\n    pass")
    'gen_inputs'
    """
    found = [f.name for f in ast.parse(reference).body
             if isinstance(f, ast.FunctionDef) and f.name != "run"
             and [a.arg for a in f.args.args] == ["axes_and_scalars", "device"]]
    return found[0] if len(found) == 1 else None


def unusable(line: dict, declared: set[str]) -> str | None:
    """Why a workload line cannot be run from the mirror alone (None: it can)."""
    inputs = line.get("inputs", {})
    extra, missing = sorted(set(inputs) - declared), sorted(declared - set(inputs))
    if extra or missing:
        return (f"inputs differ from the definition's (undeclared: {', '.join(extra) or '-'}; "
                f"not given: {', '.join(missing) or '-'})")
    for name, spec in inputs.items():
        kind = spec.get("type")
        if kind == "scalar" and "value" not in spec:
            return f"input {name}: scalar without a value"
        if kind == "safetensors":
            return f"input {name}: safetensors blob {spec.get('path')!r} is not in the mirror"
    return None


@dataclass
class Export:
    """What was written and what was skipped, for the manifest."""

    sources: dict[str, str] = field(default_factory=dict)
    problems: int = 0
    workloads: int = 0
    exported_problems: int = 0
    exported_workloads: int = 0
    skipped_workloads: list[dict] = field(default_factory=list)
    skipped_problems: list[dict] = field(default_factory=list)
    packets: dict = field(default_factory=dict)

    def summary(self) -> str:
        kinds = ("safetensors blob", "scalar without a value", "inputs differ")
        reasons = Counter(next((k for k in kinds if k in s["reason"]), s["reason"]) for s in self.skipped_workloads)
        why = "; ".join(f"{n} {r}" for r, n in reasons.most_common())
        return (f"{self.problems} problems, {self.workloads} workloads in the mirror: exported "
                f"{self.exported_workloads} workloads of {self.exported_problems} problems; skipped "
                f"{len(self.skipped_workloads)} workloads ({why or 'none'}) and {len(self.skipped_problems)} "
                f"problems; definitions equal to the dataset's packets: {self.packets.get('agree', 0)} of "
                f"{self.packets.get('compared', 0)}")


def definition_of(entry: dict, lines: list[dict]) -> dict:
    """definition.json of a dataset-meta entry (ExportError where no input generator is found)."""
    doc = {k: v for k, v in entry.items() if k != "workloads"} | {"custom_inputs_entrypoint": None}
    if any(s.get("type") == "custom" for w in lines for s in w.get("inputs", {}).values()):
        entry_point = input_entrypoint(doc["reference"])
        if entry_point is None:
            raise ExportError("custom inputs, but the reference has no single function "
                              "(axes_and_scalars, device) to generate them")
        doc["custom_inputs_entrypoint"] = entry_point
    return {k: doc[k] for k in KEY_ORDER if k in doc} | {k: v for k, v in doc.items() if k not in KEY_ORDER}


def _check_packets(mirror: Mirror, head: str, written: dict[str, dict], out: Export) -> None:
    """Compare rebuilt definitions with the packets' definition.json (the dataset's own files)."""
    seen: dict[str, bool] = {}
    diffs: list[str] = []
    for p in mirror.paths(head, PACKETS):
        parts = p.split("/")
        if parts[-1] != "definition.json" or parts[-2] != "packet":
            continue
        key = parts[-3]
        if key not in written:
            continue
        text = mirror.read(head, p)
        same = text is not None and json.loads(text) == written[key]
        if not same and key not in diffs:
            diffs.append(key)
        seen[key] = seen.get(key, True) and same
    out.packets = {"compared": len(seen), "agree": sum(seen.values()), "differ": diffs}


def export(git_dir: Path, out_dir: Path) -> Export:
    """Write the corpus to ``out_dir``; the manifest's content."""
    mirror = Mirror(git_dir)
    out = Export()
    try:
        meta_at = mirror.newest(META)
        if meta_at is None:
            raise ExportError(f"{git_dir}: {META} is in no commit")
        meta = json.loads(mirror.read(meta_at, META) or "{}").get("problems", {})
        head = mirror._git("rev-parse", "HEAD").strip()
        out.sources = {"definitions": f"{META}@{meta_at}", "workloads": f"{WORKLOADS}@{head}"}
        pub_at = mirror.newest(PUBLISHED)
        out_dir.mkdir(parents=True, exist_ok=True)
        if pub_at is not None:
            (out_dir / "published.json").write_text(mirror.read(pub_at, PUBLISHED) or "")
            out.sources["published"] = f"{PUBLISHED}@{pub_at}"
        written: dict[str, dict] = {}
        for key, entry in sorted(meta.items()):
            subset, _, name = key.partition("__")
            out.problems += 1
            out.workloads += len(entry.get("workloads", []))
            where = WORKLOADS.format(subset=subset, name=name)
            text = mirror.read(head, where)
            try:
                if text is None:
                    raise ExportError(f"{where} is not in the mirror")
                lines = [json.loads(t) for t in text.splitlines() if t.strip()]
                if [(w["uuid"], w["axes"]) for w in lines] != [(w["uuid"], w["axes"]) for w in entry["workloads"]]:
                    raise ExportError(f"{where}: uuids or axes differ from {META}'s")
                defn = definition_of(entry, lines)
            except (ExportError, KeyError, json.JSONDecodeError) as e:
                out.skipped_problems.append({"problem": f"{subset}/{name}", "reason": str(e)})
                continue
            kept = []
            for i, w in enumerate(lines):
                why = unusable(w, set(defn["inputs"]))
                if why is None:
                    kept.append(w)
                else:
                    out.skipped_workloads.append({"problem": f"{subset}/{name}", "line": i + 1,
                                                  "uuid": w["uuid"], "reason": why})
            if not kept:
                out.skipped_problems.append({"problem": f"{subset}/{name}", "reason": "no workload line is usable"})
                continue
            folder = out_dir / subset / name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "definition.json").write_text(json.dumps(defn, indent=2) + "\n")
            (folder / "reference.py").write_text(defn["reference"])
            (folder / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in kept))
            written[key] = defn
            out.exported_problems += 1
            out.exported_workloads += len(kept)
        _check_packets(mirror, head, written, out)
    finally:
        mirror.close()
    manifest = {"note": "written by benchmarks/sol_execbench_export.py; nothing filled in: a workload "
                        "the mirror cannot run is skipped and listed here",
                "rules": __doc__.split("Reconstruction rules")[1].split("Example")[0].strip(),
                **out.__dict__}
    (out_dir / "export.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mirror", type=Path, help="git dir of a williamqwu/sol-execbench-rocm mirror")
    ap.add_argument("out", type=Path, help="folder to write the corpus to")
    a = ap.parse_args()
    try:
        print(export(a.mirror, a.out).summary())
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
