"""Child process of the sandbox: run an IR program's ``model`` on the golden inputs.

Started by ``sandbox.run_program`` in its own temporary directory and session:
``isolate(cpu_s, mem)`` first sets the resource limits and moves the process into a network
namespace of its own when the kernel allows it (``unshare(CLONE_NEWNET)``, else a new user
namespace with one; where neither is permitted the reason is recorded), then
``main(PROG, INPUTS.npz, OUT.npz, RESULT.json)`` installs, after its imports, an audit hook
that refuses sockets, subprocesses and opening files outside the temporary directory and the
Python installation, and runs the program.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
import traceback

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
#: how the child is cut off from the network: set by ``isolate``, reported in the result
ISOLATION: dict = {"network_namespace": False, "reason": "isolate() was not called"}


def isolate(cpu_s: int, mem: int) -> None:
    """Resource limits (CPU seconds, address space, file size, no core files), then a
    network namespace with no interface but loopback when the kernel permits one."""
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
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
    import socket

    try:
        return sorted(name for _, name in socket.if_nameindex())
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


def main(prog: str, inputs: str, out: str, result: str) -> None:
    import numpy as np

    from solar_io.frontends.loopir.capture import load_program, model_params, run_model
    from solar_io.frontends.loopir.ir import Dim

    tmp = os.path.dirname(os.path.abspath(result))
    res: dict = {"ok": False}
    with np.load(inputs) as z:
        arrays = {k: z[k] for k in z.files}
    isolation = {**ISOLATION, "interfaces": _interfaces()}
    _guard(tmp)
    try:
        from pathlib import Path

        path = Path(prog)
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
        np.savez(out, **{k: np.asarray(v.numpy()) for k, v in outs.items()})
        res = {"ok": True, "outputs": list(outs)}
    except BaseException as e:  # noqa: BLE001 - everything goes back to the model as a diagnostic
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        res = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": "".join(tb)[-4000:]}
    with open(result, "w") as f:
        json.dump({**res, "isolation": isolation}, f)


if __name__ == "__main__":
    main(*sys.argv[1:5])
