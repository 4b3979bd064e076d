"""Child process of the sandbox: run an IR program's ``model`` on the golden inputs and lift it.

Started by ``sandbox.run_program``, inside the jail (``jail.py``) or, with ``--unsafe-exec``, in
a plain child process. ``main(argv)`` with argv ``CPU_S MEM_BYTES FILE_BYTES NPROC JAILED TMP``:

1. ``limit``: resource limits (CPU seconds, address space, file size, processes, no core
   files); in the jail, a process started as root drops to uid/gid 65534 with no groups first;
   outside it, a network namespace of its own where the kernel allows one (``isolate``);
2. reads stdin: one JSON line ``{"program", "name"}`` and then the inputs as .npz bytes;
3. keeps a private copy of stdout for its answer and points fd 1 at stderr (the program's
   prints cannot corrupt the answer), imports what it needs, loads the second seccomp stage
   (no exec, no fork: ``jail.no_spawn_filter``) and an audit hook that turns forbidden calls
   into clear diagnostics (the jail, not the hook, is what enforces);
4. writes the program to TMP, runs ``model``, lifts the program with the loop-IR lifter
   (validate=False; the parent compares the outputs) and answers one JSON line
   ``{"ok", "outputs", "graph", "error", "traceback", "isolation"}`` and the outputs as .npz.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import resource
import sys
import traceback

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
NOBODY = 65534
#: what cut the child off: set by ``limit``/``isolate``, reported in the answer
ISOLATION: dict = {}


def limit(cpu_s: int, mem: int, fsize: int, nproc: int, jailed: bool) -> None:
    """Resource limits; in the jail, drop root to nobody first (so RLIMIT_NPROC binds)."""
    if jailed and os.getuid() == 0:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if jailed:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    try:
        with open("/proc/self/status") as f:
            caps = f.read().split("CapEff:")[1].split()[0]
    except (OSError, IndexError):
        caps = "unknown"
    limits = {"cpu_s": cpu_s, "address_space": mem, "file_size": fsize, "processes": nproc if jailed else None}
    ISOLATION.update(uid=os.getuid(), capabilities=caps, limits=limits)


def isolate() -> None:
    """Outside the jail: a network namespace with no interface but loopback when the kernel
    permits one (else the reason is recorded)."""
    libc = ctypes.CDLL(None, use_errno=True)
    errors = []
    for flags, what in ((CLONE_NEWNET, "unshare(CLONE_NEWNET)"),
                        (CLONE_NEWUSER | CLONE_NEWNET, "unshare(CLONE_NEWUSER|CLONE_NEWNET)")):
        if libc.unshare(flags) == 0:
            ISOLATION.update(network_namespace=True, reason=what)
            return
        errors.append(f"{what}: {os.strerror(ctypes.get_errno())}")
    ISOLATION.update(network_namespace=False, reason="; ".join(errors) + " (the audit hook still refuses sockets)")


def _interfaces() -> list[str]:
    """Network interfaces this process sees (its network namespace's), from /proc/net/dev."""
    try:
        with open("/proc/net/dev") as f:
            return sorted(line.split(":")[0].strip() for line in f.read().splitlines()[2:] if ":" in line)
    except OSError:
        return []


def _guard(tmp: str) -> None:
    allowed = [os.path.realpath(p) for p in {tmp, sys.prefix, sys.base_prefix, sys.exec_prefix}]
    allowed += [os.path.realpath(p) for p in sys.path if p and os.path.isdir(p) and p not in ("", ".")]

    def hook(event: str, args) -> None:
        if event.startswith("socket.") or event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                                                      "os.fork", "os.forkexec", "pty.spawn"):
            raise PermissionError(f"sandbox: {event} is not allowed in an IR program")
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            p = os.path.realpath(os.fsdecode(args[0]))
            if not any(p == a or p.startswith(a + os.sep) for a in allowed):
                raise PermissionError(f"sandbox: opening {os.fsdecode(args[0])} is not allowed in an IR program")

    sys.addaudithook(hook)


def _no_spawn(jailed: bool) -> None:
    try:
        from solar_io.frontends.agent.jail import no_spawn_filter

        no_spawn_filter().load()
        ISOLATION["seccomp"] = "jail" if jailed else "no exec/fork only"
    except Exception as e:  # noqa: BLE001 - outside the jail (--unsafe-exec) this layer is optional
        if jailed:
            raise
        ISOLATION["seccomp"] = f"none ({type(e).__name__})"


def _run(header: dict, arrays: dict, tmp: str) -> tuple[dict, dict]:
    from pathlib import Path

    from solar_io.format.files import dumps
    from solar_io.frontends.loopir import capture_file
    from solar_io.frontends.loopir.capture import load_program, model_params, run_model
    from solar_io.frontends.loopir.ir import Dim

    path = Path(tmp) / f"{header['name']}_ir.py"
    path.write_text(header["program"])
    if header.get("run", True):
        mod = load_program(path)
        params = model_params(mod, path)
        missing = [n for n in params if n not in arrays]
        if missing:
            raise ValueError(f"model parameter(s) {missing} are not among the source's inputs {sorted(arrays)}; "
                             "name model's parameters as the source's inputs")
        for n, spec in params.items():
            if len(spec.dims) != arrays[n].ndim:
                raise ValueError(f"model parameter {n} is declared with dims {','.join(spec.dims) or '(scalar)'} "
                                 f"but the source's {n} has shape {list(arrays[n].shape)}")
        dims = {v.name: v.size for v in vars(mod).values() if isinstance(v, Dim) and v.size is not None}
        outs = run_model(mod, params, {n: arrays[n] for n in params}, path, tracer=None, jit=False, sizes=dims)
        outs = {k: v.numpy() for k, v in outs.items()}
    else:
        outs = {}
    try:
        graph = dumps(capture_file(path, validate=False, name=header["name"]))
    except Exception as e:  # noqa: BLE001 - reported to the model as a diagnostic
        raise RuntimeError(f"the program ran but lifting it failed: {' '.join(str(e).split())[:400]}") from e
    return {"ok": True, "outputs": list(outs), "graph": graph}, outs


def main(argv: list[str]) -> None:
    cpu_s, mem, fsize, nproc, jailed, tmp = int(argv[0]), int(argv[1]), int(argv[2]), int(argv[3]), argv[4] == "1", \
        argv[5]
    if jailed:  # pyseccomp finds libseccomp by running ldconfig: before the limits and the drop to nobody
        from solar_io.frontends.agent import jail

        jail.base_filter()
    limit(cpu_s, mem, fsize, nproc, jailed)
    if not jailed:
        isolate()
    else:
        ISOLATION.update(network_namespace=True, reason="bubblewrap --unshare-net")
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    data = sys.stdin.buffer.read()
    head, _, blob = data.partition(b"\n")
    header = json.loads(head)

    import numpy as np

    from solar_io.format.files import dumps  # noqa: F401 - imported before the guard
    from solar_io.frontends.loopir import capture_file  # noqa: F401

    with np.load(io.BytesIO(blob)) as z:
        arrays = {k: z[k] for k in z.files}
    ISOLATION["interfaces"] = _interfaces()
    outs: dict = {}
    try:
        _no_spawn(jailed)
        _guard(tmp)
        res, outs = _run(header, arrays, tmp)
    except BaseException as e:  # noqa: BLE001 - everything goes back to the model as a diagnostic
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        res = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": "".join(tb)[-4000:]}
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in outs.items()})
    answer.write(json.dumps({**res, "isolation": ISOLATION}).encode() + b"\n" + buf.getvalue())
    answer.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
