"""The loop: golden outputs → ask the model for an IR program → run it sandboxed → compare →
diagnose and retry → lift; successful translations are cached."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from ...graph import Graph, Producer, Validation
from ..common.errors import CaptureError
from ..loopir import SPEC_PATH
from .adapters import Golden, capture_golden, conventions
from .client import DEFAULT_MODEL, MAX_TOKENS, AnthropicClient, Client, ReplayClient
from .compare import compare
from .sandbox import DEFAULT_MEMORY, DEFAULT_TIMEOUT, run_program

METHOD = "llm-translation+numeric-check"


def spec_version() -> str:
    return hashlib.sha256(SPEC_PATH.read_bytes()).hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("SOLAR_IO_CACHE") or str(Path.home() / ".cache" / "solar-io")
    return Path(base) / "agent"


def cache_key(source: bytes, golden: Golden, model: str) -> str:
    h = hashlib.sha256()
    for part in (source, model.encode(), spec_version().encode(), golden.language.encode()):
        h.update(hashlib.sha256(part).digest())
    for k, v in sorted({**{"i:" + a: b for a, b in golden.inputs.items()},
                        **{"o:" + a: b for a, b in golden.outputs.items()}}.items()):
        h.update(f"{k}{v.shape}{v.dtype}".encode())
    return h.hexdigest()[:32]


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
    isolation: dict | None = None  # the sandbox's network isolation (see _runner.isolate)

    def sandbox_note(self) -> str:
        """How the program's process was cut off from the network, in words."""
        iso = self.isolation or {}
        if iso.get("network_namespace"):
            return "a sandbox with a network namespace of its own"
        return f"a sandbox without a network namespace ({iso.get('reason', 'not reported')})"


def request_text(path: Path, source: str, golden: Golden, context: str | None = None) -> str:
    extra = f"\n{context}\n" if context else ""
    return (f"Translate this source program ({path.name}) into an Affine Loop IR program.\n\n"
            f"```\n{source}\n```\n{extra}\n{golden.summary()}\n")


def translate(path: Path, golden: Golden, client: Client, *, model: str, max_attempts: int,
              timeout: float, memory: int, log, context: str | None = None) -> Outcome:
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
            diag, cmp, iso = check(code, golden, timeout=timeout, memory=memory)
            if diag is None:
                log(f"{path.name}: attempt {attempt}: IR program matches the source's outputs")
                return Outcome(code, attempt, tin, tout, comparison=cmp, isolation=iso)
        last = " ".join(diag.splitlines()[:2])[:300]
        log(f"{path.name}: attempt {attempt} failed: {last}")
        messages.append({"role": "user", "content": f"Attempt {attempt} failed.\n{diag}\nReply with the whole "
                         "corrected program."})
    raise CaptureError(f"{path.name}: no IR program matched the source after {max_attempts} attempt(s) "
                       f"({tin} input + {tout} output tokens); last failure: {last}")


def check(code: str, golden: Golden, *, timeout: float, memory: int):
    """(diagnostic or None, Comparison or None, the sandbox's isolation record) of IR
    program text ``code``."""
    r = run_program(code, golden.inputs, timeout=timeout, memory=memory)
    if not r.ok:
        tb = f"\nTraceback (tail):\n{r.traceback[-2500:]}" if r.traceback else ""
        return f"Running the IR program failed: {r.error}{tb}", None, r.isolation
    cmp = compare(golden.outputs, r.outputs)
    if not cmp.ok:
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in r.outputs.items())
        return ("The IR program ran but its outputs differ from the source's:\n- "
                + "\n- ".join(cmp.problems) + f"\nIR program outputs: {shapes}"), cmp, r.isolation
    return None, cmp, r.isolation


def capture_file(path: Path | str, *, validate: bool = True, strict: bool = False, seed: int = 0,
                 golden: Path | str | None = None, model: str | None = None, max_attempts: int = 5,
                 no_cache: bool = False, client: Client | None = None, timeout: float = DEFAULT_TIMEOUT,
                 memory: int = DEFAULT_MEMORY, name: str | None = None, log=None, **_) -> Graph:
    """Translate the source at ``path`` into a validated Affine Loop IR program with an LLM,
    lift it and return the graph (validation method ``llm-translation+numeric-check``).

    ``golden``: an .npz of ``input:NAME``/``output:NAME`` arrays for sources that cannot run
    here; ``client``: a ``Client`` (default: the Anthropic API, key from ANTHROPIC_API_KEY).
    """
    path = Path(path)
    if not path.is_file():
        raise CaptureError(f"{path}: no such file")
    if max_attempts < 1:
        raise CaptureError("--max-attempts must be at least 1")
    log = log or (lambda m: print(m, file=sys.stderr))
    model = model or DEFAULT_MODEL
    data = path.read_bytes()
    gold = capture_golden(path, seed, Path(golden) if golden else None)
    out = obtain(path, data, gold, model=model, client=client, max_attempts=max_attempts, no_cache=no_cache,
                 timeout=timeout, memory=memory, log=log)
    return lift(path, data, out, gold, model, seed, name)


def obtain(path: Path, data: bytes, gold: Golden, *, model: str, client: Client | None, max_attempts: int,
           no_cache: bool, timeout: float, memory: int, log, context: str | None = None) -> Outcome:
    """A checked IR program for the source ``data`` at ``path``: from the cache (re-checked),
    else translated by ``client`` (default: recorded replies named by SOLAR_IO_AGENT_REPLAY,
    else the Anthropic API) and cached."""
    key = cache_key(data + (context or "").encode(), gold, model)
    entry = cache_dir() / key
    out = None
    if not no_cache and (entry / "program.py").is_file():
        code = (entry / "program.py").read_text()
        meta = json.loads((entry / "meta.json").read_text())
        diag, cmp, iso = check(code, gold, timeout=timeout, memory=memory)
        if diag is None:
            out = Outcome(code, int(meta["attempts"]), cached=True, comparison=cmp, isolation=iso)
            log(f"{path.name}: cached translation ({model}, {out.attempts} attempt(s) originally), 0 tokens")
        else:
            log(f"{path.name}: cached translation no longer matches; translating again")
    if out is None:
        if client is None:
            replay = os.environ.get("SOLAR_IO_AGENT_REPLAY")  # recorded replies instead of the API (offline)
            client = ReplayClient(replay) if replay else AnthropicClient()
        out = translate(path, gold, client, model=model, max_attempts=max_attempts, timeout=timeout,
                        memory=memory, log=log, context=context)
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


def lift_code(code: str, path: Path, name: str | None = None) -> Graph:
    """The einsum graph of IR program text ``code`` translated from ``path`` (not validated:
    the program was checked against the source's outputs)."""
    from ..loopir import capture_file as loopir_capture

    with tempfile.TemporaryDirectory(prefix="solar-io-agent-lift-") as tmp:
        prog = Path(tmp) / f"{path.stem}_ir.py"
        prog.write_text(code)
        try:
            return loopir_capture(prog, validate=False, name=name or path.stem)
        except Exception as e:
            raise CaptureError(f"{path.name}: lifting the translated IR program failed: {str(e)[:300]}") from None


def lift(path: Path, data: bytes, out: Outcome, gold: Golden, model: str, seed: int, name: str | None) -> Graph:
    from ... import __version__

    g = lift_code(out.code, path, name)
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
