"""SOL-ExecBench / FlashInfer-Trace corpus: capture and bound every workload, hold the bounds against
published SOLs and measured baselines where a metadata file gives them.

    .venv/bin/python benchmarks/sol_execbench.py CORPUS_DIR [--hw b200@1500MHz] [--sample N]
        [--metadata FILE] [--published FILE] [--out benchmarks/results/sol_execbench.md]
        [--rows rows.json] [--only PROBLEM ... --reuse rows.json] [--cache-bound ilp|floor]

CORPUS_DIR holds problem folders (definition.json, workload.jsonl, optionally reference.py), in
subset folders (L1, L2, Quant, FlashInfer-Bench) or not; ``benchmarks/sol_execbench_export.py`` writes
the public corpus so (and its ``published.json``) from a git mirror of williamqwu/sol-execbench-rocm.
Per workload it prints: captured (or the
failure's category and line), opaque nodes, unfused / fused / cache-aware SOL on the chip, the
published SOL and the measured baseline where known, the ratios, and every violation (a fused or
cache-aware SOL above a measured latency: a bound that a real run beat). Per subset it prints the
totals and the median capture + bound seconds per workload (with --sample, each timed row stands for its
problem's lines over those sampled: ``weighted_median``). The report (markdown) goes to --out.

Metadata (optional): a JSON file {"<definition name>": {"<workload uuid>": {"sol_ms": x,
"baseline_ms": y}}}, given with --metadata or found as ``metadata.json`` beside a definition.

Published B200 values (optional, ``--published``): the leaderboard's per-workload ``sol_ms`` and
``baseline_latency_ms`` in the layout of ``reference/nvidia-b200/published.json`` of the public
mirror williamqwu/sol-execbench-rocm (commit c1f88417; fetched by its
``scripts/fetch_nvidia_b200_reference.py`` from research.nvidia.com/benchmarks/sol-execbench):
``{"kernels": {"<subset>__<definition>": {"workloads": [{"axes": {...}, "sol_ms": x,
"baseline_latency_ms": y}]}}}``. Those entries carry no workload uuid, so a workload is matched by
its axes (every published axis equal to the workload's value); where several published entries
match (workloads that differ only in their inputs) the smallest baseline and SOL are kept, the
strictest test of a lower bound.

``--tightest N`` (with ``--published``) captures, per problem, the N workloads whose published baseline is
the smallest multiple of the published SOL (the runs nearest their speed of light: the strictest test of a
lower bound on the machine time a full run has not got), instead of ``--sample``'s evenly spaced lines;
``--after K`` skips the K nearest first (``--tightest 1 --after 1``: the second nearest, a new sample
beside an earlier ``--tightest 1`` run). ``--skip NAME ...`` leaves problems out (the command line
the report quotes names them).

``--rows FILE`` writes every row (also the graph's MACs and fused boundary bytes) as JSON; with
``--only NAME ...`` only those problems are captured again and the others are taken from
``--reuse FILE`` (a rows file of an earlier run), so a fix is re-measured without the whole corpus.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from solar_io.backends.bound import bound_many
from solar_io.errors import SolarIOError
from solar_io.frontends.trace.detect import problem_dirs
from solar_io.frontends.trace.problems import capture_problem
from solar_io.units import SizeError, parse_size_int

#: failure categories, in the order they are tried: (name, words any of which the message holds).
CATEGORIES = (
    ("memory: a branch needs values of a tensor past --validate-budget", ("over --validate-budget",)),
    ("data-dependent shape or branch (issue 18: value-specialised capture)",
     ("data-dependent", "DataDependent", "GuardOnDataDependent", "data dependent", "nonzero", "unbacked")),
    ("dtype with no einsum-graph equivalent", ("has no einsum-graph equivalent",)),
    ("complex numbers / FFT", ("complex", "fft")),
    ("validation failed (graph and eager PyTorch disagree)", ("validation failed",)),
    ("definition or workload line malformed", ("axes.", "inputs.", "constraints", "dtype", "reference:")),
    ("torch.export failed (other)", ("torch.export failed",)),
)


def category(message: str) -> str:
    """The failure category of a one-line capture error."""
    low = message.lower()
    for name, words in CATEGORIES:
        if any(w.lower() in low for w in words):
            return name
    return "other"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.4g}"


def _metadata(path: Path | None, problem: Path) -> dict:
    for p in (path, problem / "metadata.json"):
        if p is not None and p.is_file():
            return json.loads(p.read_text())
    return {}


def published_index(path: Path | None) -> dict[str, list[dict]]:
    """``{"<subset>/<definition>": [published workload entries]}`` from a published.json (see above)."""
    if path is None:
        return {}
    kernels = json.loads(path.read_text()).get("kernels", {})
    return {key.replace("__", "/", 1): entry.get("workloads", []) for key, entry in kernels.items()}


def match_published(entries: list[dict], axes: dict[str, int]) -> tuple[float | None, float | None]:
    """(published SOL s, baseline s) of the entries whose axes all equal the workload's; the smallest
    of each where several match; (None, None) where none does."""
    hits = [e for e in entries if e.get("axes") and all(axes.get(k) == v for k, v in e["axes"].items())]
    sols = [e["sol_ms"] / 1e3 for e in hits if e.get("sol_ms")]
    bases = [e["baseline_latency_ms"] / 1e3 for e in hits if e.get("baseline_latency_ms")]
    return (min(sols) if sols else None), (min(bases) if bases else None)


def tightest_keys(problem: Path, entries: list[dict], n: int, after: int = 0) -> list[str] | None:
    """Keys of the ``n`` workloads of ``problem`` whose published baseline / published SOL is smallest
    (:func:`match_published` by axes), after the ``after`` smallest; None when the folder cannot be read
    or none has both figures (or none is left after ``after``)."""
    from solar_io.frontends.trace.definition import read_definition
    from solar_io.frontends.trace.workload import Workload, read_workloads

    try:
        defn = read_definition(problem / "definition.json")
        lines = [w for w in read_workloads(problem / "workload.jsonl", defn) if isinstance(w, Workload)]
    except SolarIOError:
        return None
    ratios = []
    for w in lines:
        sol, base = match_published(entries, w.sizes)
        if sol and base:
            ratios.append((base / sol, w.index, w.key))
    return [k for _, _, k in sorted(ratios)[after:after + n]] or None


def run(corpus: Path, hw: str, sample: int | None, metadata: Path | None, cache_bound: str,
        published: Path | None = None, only: list[str] | None = None, reuse: Path | None = None,
        rows_path: Path | None = None, tightest: int | None = None, after: int = 0,
        skip: list[str] | None = None, keys: list[str] | None = None, validate_budget: int | None = None) -> dict:
    """Capture and bound the corpus; the rows and totals of the report. ``keys``: only these workloads (uuid
    or line index) of the problems captured; ``validate_budget``: the captures' (bytes; default theirs)."""
    from solar_io.metrics import graph_metrics

    rows, failures = [], []
    pub = published_index(published)
    old = read_rows(reuse) if reuse is not None else {"rows": []}
    for d in problem_dirs(corpus):
        rel = d.relative_to(corpus)
        subset = rel.parts[0] if len(rel.parts) > 1 else "-"
        if skip and (str(rel) in skip or rel.name in skip):
            print(f"{rel}: skipped (--skip)", file=sys.stderr)
            continue
        if only and str(rel) not in only and rel.name not in only:
            kept = [r for r in old["rows"] if r["problem"] == str(rel)]
            rows += kept
            failures += [(r["subset"], category(r["error"]), r["error"]) for r in kept if not r["captured"]]
            continue
        t0 = time.perf_counter()
        chosen = tightest_keys(d, pub.get(str(rel), []), tightest, after) if tightest else keys
        if tightest and after and chosen is None:
            continue  # no workload past the first ``after`` (or none published): nothing new here
        options = {"validate": True, **({"validate_budget": validate_budget} if validate_budget else {})}
        results = capture_problem(d, None, options=options, problem=str(rel), keep_graphs=True,
                                  sample=None if chosen else sample, keys=chosen)
        meta = _metadata(metadata, d)
        lines_path = d / "workload.jsonl"
        total = sum(1 for x in lines_path.read_text().splitlines() if x.strip()) if lines_path.exists() else 0
        weight = total / len(results) if sample and not chosen and 0 < len(results) < total else 1.0
        for r in results:
            row = {"subset": subset, "problem": str(rel), "key": r.key, "captured": r.status == "captured",
                   "opaque": len(r.opaque), "capture_s": r.seconds,
                   "error": r.error, **({"weight": weight} if weight != 1.0 else {})}
            if r.graph is not None:
                t1 = time.perf_counter()
                try:
                    (rep,) = bound_many(r.graph, [hw], cache_aware=True, cache_bound=cache_bound)
                    row.update(unfused=rep.unfused.time, fused=rep.fused.time, cache=rep.cache_aware.time)
                except SolarIOError as e:
                    row["captured"], row["error"] = False, f"bound: {e}"
                row["bound_s"] = time.perf_counter() - t1
                gm = graph_metrics(r.graph)
                row.update(macs=gm.macs, boundary_bytes=gm.boundary_bytes)
                m = meta.get(r.graph.name, {}).get(r.key, {})
                row["sol"] = m.get("sol_ms") / 1e3 if m.get("sol_ms") else None
                row["baseline"] = m.get("baseline_ms") / 1e3 if m.get("baseline_ms") else None
                wl = r.graph.producer.workload
                if row["sol"] is None and row["baseline"] is None and wl is not None and str(rel) in pub:
                    row["sol"], row["baseline"] = match_published(pub[str(rel)], dict(wl.axes))
            if not row["captured"]:
                failures.append((subset, category(row["error"]), row["error"]))
            rows.append(row)
        print(f"{rel}: {sum(r['captured'] for r in rows if r['problem'] == str(rel))}/{len(results)} captured "
              f"in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        if rows_path is not None:  # after every problem, so a long run can be read while it goes
            write_rows(rows_path, rows)
    return {"rows": rows, "failures": failures}


def dump_rows(rows: list[dict]) -> str:
    """A rows file: JSON with one row a line, so a results file kept in git diffs by workload."""
    body = ",\n".join(json.dumps(r, default=str, sort_keys=True) for r in rows)
    return '{"rows": [\n' + body + "\n]}\n"


def write_rows(path: Path, rows: list[dict]) -> None:
    """A rows file (:func:`dump_rows`), gzip-compressed when ``path`` ends in ``.gz`` (a whole corpus's rows
    are 1.3 MB of JSON, 0.2 MB compressed)."""
    text = dump_rows(rows)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text)


def read_rows(path: Path) -> dict:
    """A rows file as :func:`write_rows` wrote it."""
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def _seconds(r: dict) -> float | None:
    """A row's capture + bound seconds; None for a row whose times were not kept (see the header)."""
    return None if r.get("capture_s") is None else r["capture_s"] + r.get("bound_s", 0.0)


def violations(rows: list[dict]) -> list[str]:
    """Every fused or cache-aware SOL above a measured baseline."""
    out = []
    for r in rows:
        b = r.get("baseline")
        for fid in ("fused", "cache"):
            if b is not None and r.get(fid) is not None and r[fid] > b:
                out.append(f"{r['problem']}:{r['key']}: {fid} SOL {_ms(r[fid])} ms > measured {_ms(b)} ms")
    return out


def weighted_median(timed: list[tuple[float, float]]) -> float:
    """The median of seconds each standing for ``weight`` workloads: a row of a problem run with ``--sample``
    stands for its problem's lines over those sampled, so a sampled corpus's median estimates the whole
    corpus's (stratified by problem); with every weight 1, :func:`statistics.median`.

    >>> weighted_median([(1.0, 1.0), (2.0, 1.0), (9.0, 5.0)])
    9.0
    """
    if all(w == 1.0 for _, w in timed):
        return statistics.median(t for t, _ in timed)
    total, acc = sum(w for _, w in timed), 0.0
    for t, w in sorted(timed):
        acc += w
        if acc >= total / 2:
            return t
    return max(t for t, _ in timed)


def report(data: dict, hw: str, command: str, per_problem: bool = False) -> str:
    """The markdown report: per subset, per workload (``per_problem``: per problem instead), violations,
    failure categories."""
    rows, failures = data["rows"], data["failures"]
    lines = [f"# SOL-ExecBench corpus on {hw}", "", f"Command: `{command}`", ""]
    lines += ["| subset | workloads | captured | with opaque nodes | timed | median capture+bound s | max s |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    by = defaultdict(list)
    for r in rows:
        by[r["subset"]].append(r)
    for subset, rs in [*sorted(by.items()), ("all", rows)]:
        timed = [(t, r.get("weight", 1.0)) for r in rs if r["captured"] and (t := _seconds(r)) is not None]
        lines.append(f"| {subset} | {len(rs)} | {sum(r['captured'] for r in rs)} | "
                     f"{sum(r['opaque'] > 0 for r in rs if r['captured'])} | "
                     f"{len(timed)} | " + (f"{weighted_median(timed):.2f} | {max(t for t, _ in timed):.2f} |"
                                           if timed else "- | - |"))
    viol = violations(rows)
    known = sum(r.get("baseline") is not None for r in rows)
    bad = len({v.split(": ", 1)[0] for v in viol})  # a workload's fused and cache-aware lines count once
    lines += ["", f"Violations (fused or cache-aware SOL above a measured baseline): {bad} of {known} "
              f"workloads with a measured baseline ({len(viol)} lines below).", *[f"- {v}" for v in viol], ""]
    lines += ["## Capture failures by category", "", "| category | workloads | subsets | example |",
              "| --- | --- | --- | --- |"]
    cats = Counter(c for _, c, _ in failures)
    for c, n in cats.most_common():
        ex = next(e for _, cc, e in failures if cc == c)
        subs = ", ".join(sorted({s for s, cc, _ in failures if cc == c}))
        lines.append(f"| {c} | {n} | {subs} | `{ex[:220].replace('|', '/')}` |")
    lines += ["", "## Every failure", ""]
    lines += [f"- {e[:400]}" for _, _, e in failures]
    lines += _problem_table(rows) if per_problem else _workload_table(rows)
    return "\n".join(lines) + "\n"


def _workload_table(rows: list[dict]) -> list[str]:
    lines = ["", "## Workloads", "",
             "| workload | captured | opaque | unfused ms | fused ms | cache-aware ms | published SOL ms | "
             "baseline ms | baseline / fused | published SOL / fused | capture+bound s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ratio = (f"{r['baseline'] / r['fused']:.3g}" if r.get("baseline") and r.get("fused") else "-")
        ratio += " | " + (f"{r['sol'] / r['fused']:.3g}" if r.get("sol") and r.get("fused") else "-")
        ratio += " | " + (f"{t:.2f}" if (t := _seconds(r)) is not None else "-")
        lines.append(f"| {r['problem']}:{r['key']} | {'yes' if r['captured'] else 'no'} | {r['opaque']} | "
                     f"{_ms(r.get('unfused'))} | {_ms(r.get('fused'))} | {_ms(r.get('cache'))} | "
                     f"{_ms(r.get('sol'))} | {_ms(r.get('baseline'))} | {ratio} |")
    return lines


def _problem_table(rows: list[dict]) -> list[str]:
    """Per problem: its workloads, captured, with opaque nodes, violating, the smallest ratios of the baseline
    and of the published SOL to the larger of the fused and cache-aware bounds (the workloads nearest a
    violation), the median seconds."""
    lines = ["", "## Problems", "",
             "| problem | workloads | captured | opaque | violating | min baseline / bound | "
             "min published SOL / bound | median capture+bound s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by[r["problem"]].append(r)
    bad = {v.split(": ", 1)[0] for v in violations(rows)}
    for prob, rs in by.items():
        bound = {r["key"]: max(r.get("fused") or 0, r.get("cache") or 0) for r in rs}
        base = [r["baseline"] / bound[r["key"]] for r in rs if r.get("baseline") and bound[r["key"]]]
        sol = [r["sol"] / bound[r["key"]] for r in rs if r.get("sol") and bound[r["key"]]]
        secs = [t for r in rs if r["captured"] and (t := _seconds(r)) is not None]
        nearest = [f"{min(v):.3g}" if v else "-" for v in (base, sol)]
        keys = {f"{prob}:{r['key']}" for r in rs}
        lines.append(f"| {prob} | {len(rs)} | {sum(r['captured'] for r in rs)} | "
                     f"{sum(r['opaque'] > 0 for r in rs if r['captured'])} | {len(keys & bad)} | {nearest[0]} | "
                     f"{nearest[1]} | " + (f"{statistics.median(secs):.2f} |" if secs else "- |"))
    return lines


def _budget(text: str) -> int:
    """``--validate-budget``'s bytes; a size that does not read is argparse's one-line usage error."""
    try:
        return parse_size_int(text, "--validate-budget")
    except SizeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--hw", default="b200@1500MHz", help="chip (default b200@1500MHz, the harness's lock)")
    ap.add_argument("--sample", type=int, default=None, help="workloads per problem, evenly spaced (default all)")
    ap.add_argument("--metadata", type=Path, default=None)
    ap.add_argument("--published", type=Path, default=None, help="published.json of the leaderboard (see above)")
    ap.add_argument("--rows", type=Path, default=None, help="write every row as JSON here (gzip: name.json.gz)")
    ap.add_argument("--only", nargs="*", default=None, help="capture only these problems (subset/name or name)")
    ap.add_argument("--reuse", type=Path, default=None, help="rows JSON of an earlier run, for the other problems")
    ap.add_argument("--tightest", type=int, default=None,
                    help="per problem, the N workloads nearest their published SOL (needs --published)")
    ap.add_argument("--after", type=int, default=0, help="with --tightest: skip the K nearest first")
    ap.add_argument("--skip", nargs="*", default=None, help="leave these problems out (subset/name or name)")
    ap.add_argument("--cache-bound", default="ilp", choices=("ilp", "floor"))
    ap.add_argument("--keys", nargs="*", default=None, help="only these workloads (uuid or line index) of --only")
    ap.add_argument("--validate-budget", default=None, type=_budget,
                    help="the captures' --validate-budget (default solar-io capture's); the report's command says it")
    ap.add_argument("--per-problem", action="store_true",
                    help="one line a problem instead of a line a workload (a whole corpus; the rows file has those)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/sol_execbench.md"))
    a = ap.parse_args()
    data = run(a.corpus, a.hw, a.sample, a.metadata, a.cache_bound, a.published, a.only, a.reuse, a.rows,
               a.tightest, a.after, a.skip, a.keys, a.validate_budget)
    text = report(data, a.hw, " ".join(["python", *sys.argv]), per_problem=a.per_problem)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(text)
    for line in text.splitlines()[:14]:
        print(line)
    print(f"report written to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
