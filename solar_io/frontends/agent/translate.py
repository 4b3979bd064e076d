"""The loop: golden outputs → ask the model for an IR program → run it sandboxed → compare →
diagnose and retry → lift; successful translations are cached."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from ...errors import SolarIOError
from ...format.files import loads
from ...graph import Graph, Producer, Validation
from ..common.errors import CaptureError
from ..common.inputs import split_entry
from ..loopir import SPEC_PATH
from .adapters import Golden, capture_golden, conventions
from .client import DEFAULT_MODEL, MAX_TOKENS, AnthropicClient, Client, ReplayClient
from .compare import compare
from .sandbox import DEFAULT_MEMORY, DEFAULT_TIMEOUT, require_jail, run_program

METHOD = "llm-translation+numeric-check"
NO_KEY = ("ANTHROPIC_API_KEY is not set: the agent frontend needs an Anthropic API key in the environment "
          "(or SOLAR_IO_AGENT_REPLAY naming recorded replies, or a cached translation)")


def spec_version() -> str:
    return hashlib.sha256(SPEC_PATH.read_bytes()).hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("SOLAR_IO_CACHE") or str(Path.home() / ".cache" / "solar-io")
    return Path(base) / "agent"


def source_key(source: bytes, model: str) -> str:
    """The cache folder of a source text and model (known before the source runs)."""
    h = hashlib.sha256()
    for part in (source, model.encode(), spec_version().encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:32]


def cache_key(source: bytes, golden: Golden, model: str) -> str:
    """The cache entry, under ``source_key``: also the golden data's language, names, shapes, dtypes."""
    h = hashlib.sha256(golden.language.encode())
    for k, v in sorted({**{"i:" + a: b for a, b in golden.inputs.items()},
                        **{"o:" + a: b for a, b in golden.outputs.items()}}.items()):
        h.update(f"{k}{v.shape}{v.dtype}".encode())
    return f"{source_key(source, model)}/{h.hexdigest()[:32]}"


def has_cached(source: bytes, model: str) -> bool:
    """Whether the cache holds a translation of ``source`` by ``model`` (for any inputs)."""
    d = cache_dir() / source_key(source, model)
    return d.is_dir() and any(d.glob("*/program.py"))


def extract_code(text: str) -> str | None:
    """The last ```python block of a reply (or the last ``` block)."""
    blocks, lang, buf, inside = [], "", [], False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("```"):
            if inside:
                blocks.append((lang, "\n".join(buf) + "\n"))
                inside, buf = False, []
            else:
                inside, lang = True, s[3:].strip().lower()
        elif inside:
            buf.append(line)
    py = [b for lg, b in blocks if lg in ("python", "py")] or [b for lg, b in blocks if not lg]
    return py[-1] if py else None


@dataclass
class Outcome:
    code: str
    attempts: int
    input_tokens: int = 0
    output_tokens: int = 0
    cached: bool = False
    comparison: object = None
    isolation: dict | None = None  # how the program was isolated (see sandbox.run_program)
    graph: str | None = None  # the lifted program (canonical YAML), lifted inside the sandbox

    def sandbox_note(self) -> str:
        """How the program's process was isolated, in words."""
        iso = self.isolation or {}
        if iso.get("jail"):
            return (f"a bubblewrap jail (uid {iso.get('uid')}, its own pid, mount and network namespaces, "
                    "read-only system, seccomp, CPU/memory/file-size/process limits)")
        net = ("a network namespace of its own" if iso.get("network_namespace") else
               f"no network namespace ({iso.get('reason', 'not reported')})")
        return f"an unjailed child process (--unsafe-exec: resource limits, an audit hook, {net})"


def request_text(path: Path, source: str, golden: Golden, context: str | None = None) -> str:
    extra = f"\n{context}\n" if context else ""
    return (f"Translate this source program ({path.name}) into an Affine Loop IR program.\n\n"
            f"```\n{source}\n```\n{extra}\n{golden.summary()}\n")


def translate(path: Path, golden: Golden, client: Client, *, model: str, max_attempts: int,
              timeout: float, memory: int, log, context: str | None = None, unsafe: bool = False) -> Outcome:
    """Ask ``client`` for an IR program of the source at ``path`` until one reproduces the
    golden outputs (``context``: more text for the request, e.g. where a custom op is defined)."""
    source = path.read_text(errors="replace")
    system = [SPEC_PATH.read_text(), conventions(golden.language)]
    messages: list[dict] = [{"role": "user", "content": request_text(path, source, golden, context)}]
    tin = tout = 0
    last = ""
    for attempt in range(1, max_attempts + 1):
        reply = client.complete(system, messages, model, MAX_TOKENS)
        tin, tout = tin + reply.input_tokens, tout + reply.output_tokens
        messages.append({"role": "assistant", "content": reply.text})
        code = extract_code(reply.text)
        if code is None:
            diag = "Your reply has no ```python code block. Reply with the complete IR program in one block."
        else:
            diag, cmp, iso, graph = check(code, golden, timeout=timeout, memory=memory, name=path.stem,
                                          unsafe=unsafe)
            if diag is None:
                log(f"{path.name}: attempt {attempt}: IR program matches the source's outputs")
                return Outcome(code, attempt, tin, tout, comparison=cmp, isolation=iso, graph=graph)
        last = " ".join(diag.splitlines()[:2])[:300]
        log(f"{path.name}: attempt {attempt} failed: {last}")
        messages.append({"role": "user", "content": f"Attempt {attempt} failed.\n{diag}\nReply with the whole "
                         "corrected program."})
    raise CaptureError(f"{path.name}: no IR program matched the source after {max_attempts} attempt(s) "
                       f"({tin} input + {tout} output tokens); last failure: {last}")


def check(code: str, golden: Golden, *, timeout: float, memory: int, name: str = "prog", unsafe: bool = False):
    """(diagnostic or None, Comparison or None, the sandbox's isolation record, the lifted
    graph's YAML or None) of IR program text ``code``, run and lifted in the sandbox."""
    r = run_program(code, golden.inputs, timeout=timeout, memory=memory, name=name, unsafe=unsafe)
    if not r.ok:
        tb = f"\nTraceback (tail):\n{r.traceback[-2500:]}" if r.traceback else ""
        return f"Running the IR program failed: {r.error}{tb}", None, r.isolation, None
    cmp = compare(golden.outputs, r.outputs)
    if not cmp.ok:
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in r.outputs.items())
        return ("The IR program ran but its outputs differ from the source's:\n- "
                + "\n- ".join(cmp.problems) + f"\nIR program outputs: {shapes}"), cmp, r.isolation, None
    return None, cmp, r.isolation, r.graph


def entry_source(path: Path, entry: str | None) -> Path:
    """The file whose text goes to the model: ``--entry FILE.py:NAME``'s file, the file of an
    importable module ``--entry pkg.mod:NAME`` (found without importing it where it can be), else
    ``path``."""
    if not entry:
        return path
    where, _ = split_entry(entry)
    if not where:
        return path
    if where.endswith(".py") or Path(where).is_file():
        return Path(where)
    try:
        spec = importlib.util.find_spec(where)
    except (ImportError, ValueError) as e:
        raise CaptureError(f"--entry {entry}: cannot find module {where}: {e}") from None
    if spec is None:
        raise CaptureError(f"--entry {entry}: cannot find module {where}")
    if not (spec.origin or "").endswith(".py"):
        raise CaptureError(f"--entry {entry}: module {where} has no Python source file to translate")
    return Path(spec.origin)


def capture_file(path: Path | str, *, validate: bool = True, strict: bool = False, seed: int = 0,
                 golden: Path | str | None = None, model: str | None = None, max_attempts: int = 5,
                 no_cache: bool = False, client: Client | None = None, timeout: float = DEFAULT_TIMEOUT,
                 memory: int = DEFAULT_MEMORY, name: str | None = None, log=None, unsafe_exec: bool = False,
                 entry: str | None = None, inputs: list[str] | None = None, inputs_from: str | None = None,
                 dtype: str | None = None, eval_mode: bool = False, **_) -> Graph:
    """Translate the source at ``path`` into a validated Affine Loop IR program with an LLM,
    lift it and return the graph (validation method ``llm-translation+numeric-check``).

    ``golden``: an .npz of ``input:NAME``/``output:NAME`` arrays for sources that cannot run
    here; ``client``: a ``Client`` (default: recorded replies named by SOLAR_IO_AGENT_REPLAY, else
    the Anthropic API, key from ANTHROPIC_API_KEY); ``unsafe_exec``: run translated programs
    without the jail when it is unavailable; ``entry``, ``inputs``, ``inputs_from``, ``dtype``,
    ``eval_mode``: as the PyTorch frontend reads a PyTorch source (its loader is used).
    Before any work: the jail must work (or ``unsafe_exec``) and, unless a client, a replay or a
    cached translation of this source is there, ANTHROPIC_API_KEY must be set.
    """
    path = entry_source(Path(path), entry)
    if not path.is_file():
        raise CaptureError(f"{path}: no such file")
    if max_attempts < 1:
        raise CaptureError("--max-attempts must be at least 1")
    log = log or (lambda m: print(m, file=sys.stderr))
    model = model or DEFAULT_MODEL
    data = path.read_bytes()
    if client is None and not os.environ.get("SOLAR_IO_AGENT_REPLAY") and not os.environ.get("ANTHROPIC_API_KEY") \
            and (no_cache or not has_cached(data, model)):
        raise CaptureError(NO_KEY)
    require_jail(unsafe_exec)
    gold = capture_golden(path, seed, Path(golden) if golden else None, entry=entry, inputs=inputs,
                          inputs_from=inputs_from, dtype=dtype, eval_mode=eval_mode)
    out = obtain(path, data, gold, model=model, client=client, max_attempts=max_attempts, no_cache=no_cache,
                 timeout=timeout, memory=memory, log=log, unsafe=unsafe_exec)
    return lift(path, data, out, gold, model, seed, name)


def obtain(path: Path, data: bytes, gold: Golden, *, model: str, client: Client | None, max_attempts: int,
           no_cache: bool, timeout: float, memory: int, log, context: str | None = None,
           unsafe: bool = False) -> Outcome:
    """A checked IR program for the source ``data`` at ``path``: from the cache (re-checked),
    else translated by ``client`` (default: recorded replies named by SOLAR_IO_AGENT_REPLAY,
    else the Anthropic API) and cached."""
    key = cache_key(data + (context or "").encode(), gold, model)
    entry = cache_dir() / key
    out = None
    if not no_cache and (entry / "program.py").is_file():
        code = (entry / "program.py").read_text()
        meta = json.loads((entry / "meta.json").read_text())
        diag, cmp, iso, graph = check(code, gold, timeout=timeout, memory=memory, name=path.stem, unsafe=unsafe)
        if diag is None:
            out = Outcome(code, int(meta["attempts"]), cached=True, comparison=cmp, isolation=iso, graph=graph)
            log(f"{path.name}: cached translation ({model}, {out.attempts} attempt(s) originally), 0 tokens")
        else:
            log(f"{path.name}: cached translation no longer matches; translating again")
    if out is None:
        if client is None:
            replay = os.environ.get("SOLAR_IO_AGENT_REPLAY")  # recorded replies instead of the API (offline)
            client = ReplayClient(replay) if replay else AnthropicClient()
        out = translate(path, gold, client, model=model, max_attempts=max_attempts, timeout=timeout,
                        memory=memory, log=log, context=context, unsafe=unsafe)
        log(f"{path.name}: translated by {model} in {out.attempts} attempt(s), "
            f"{out.input_tokens} input + {out.output_tokens} output tokens")
        if not no_cache:
            _store(entry, out, model)
    return out


def _store(entry: Path, out: Outcome, model: str) -> None:
    try:
        entry.mkdir(parents=True, exist_ok=True)
        for fname, text in (("program.py", out.code),
                            ("meta.json", json.dumps({"model": model, "attempts": out.attempts,
                                                      "spec_version": spec_version()}, indent=1))):
            tmp = entry / (fname + ".tmp")
            tmp.write_text(text)
            tmp.replace(entry / fname)
    except OSError as e:
        print(f"warning: cannot write the agent cache {entry}: {e.strerror or e}", file=sys.stderr)


def lift_code(code: str, path: Path, name: str | None = None, *, graph: str | None = None,
              unsafe: bool = False) -> Graph:
    """The einsum graph of IR program text ``code`` translated from ``path`` (not validated:
    the program was checked against the source's outputs). The program is lifted inside the
    sandbox (its module body is model-written code); ``graph``: the YAML a checked run already
    lifted it to."""
    if graph is None:
        r = run_program(code, {}, name=path.stem, lift_only=True, unsafe=unsafe)
        if not r.ok or r.graph is None:
            raise CaptureError(f"{path.name}: lifting the translated IR program failed: {r.error}")
        graph = r.graph
    try:
        g = loads(graph, f"{path.stem}_ir.py (lifted)")
    except SolarIOError as e:
        raise CaptureError(f"{path.name}: the lifted IR program is not a valid graph: {str(e)[:300]}") from None
    return replace(g, name=name) if name else g


def lift(path: Path, data: bytes, out: Outcome, gold: Golden, model: str, seed: int, name: str | None) -> Graph:
    from ... import __version__

    g = lift_code(out.code, path, name, graph=out.graph)
    c = out.comparison
    v = Validation(status="passed", method=METHOD, reference=f"{gold.reference} (source outputs)", seed=seed,
                   rtol=c.rtol, atol=c.atol, max_abs_error=c.max_abs_error, max_rel_error=c.max_rel_error,
                   reason=f"IR program translated by an LLM, run in {out.sandbox_note()} and compared with the "
                          "source's outputs",
                   model=model, attempts=out.attempts)
    prod = Producer(tool_version=__version__, frontend="agent", frontend_version=spec_version(), source=path.name,
                    source_sha256=hashlib.sha256(data).hexdigest())
    return replace(g, producer=prod, validation=v)


__all__ = ["capture_file", "check", "extract_code", "lift_code", "obtain", "translate"]
