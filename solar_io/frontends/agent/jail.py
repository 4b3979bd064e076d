"""The OS-level jail translated programs run in: bubblewrap (``bwrap``) plus seccomp filters.

What it does (``command`` builds the ``bwrap`` line; ``_runner`` finishes inside):

- **a separate user**: started by root, bwrap keeps the host user namespace and the runner drops
  to uid/gid 65534 (nobody, no groups, no capabilities) before it reads the program; started
  by another user, bwrap makes a user namespace in which the program is uid 65534 with no
  capabilities. Either way ``RLIMIT_NPROC`` then binds (it never binds a real root).
- **new pid, network, ipc, uts and mount namespaces**: a fresh ``/proc`` that shows only the
  jail's own processes (not the parent's ``environ``), no network interface but a down loopback.
- **a file system of read-only binds** of what the program needs: ``/usr`` (and the ``/bin``,
  ``/lib*`` links), ``ld.so.cache``, the Python installation, the virtual environment and the
  ``solar_io`` package directory; a minimal ``/dev``; a private, size-capped tmpfs at
  ``/sandbox`` as the only writable place. The program, its inputs and its outputs travel
  over stdin and stdout, so no host directory is bound at all.
- **an environment cleared to ``ALLOWED_ENV``** (no API key, no proxy or home of the caller).
- **seccomp, two stages**: ``base_filter`` (handed to bwrap, in force from the runner's first
  instruction) refuses what a numerical program never needs: ``ptrace``, mounts, ``kexec``,
  ``bpf``, ``perf_event_open``, keyrings, module loading, namespace changes, ``io_uring``,
  sockets other than AF_UNIX, ... ; ``no_spawn_filter`` (loaded by the runner after its
  imports, before the program is read) also refuses ``execve``/``execveat`` and every
  ``fork``/``clone`` that is not a thread, so no shell or other program can start.
- **limits** (set by the runner before anything else): CPU seconds, address space, the size of
  any file written, process/thread count, no core files; the parent also kills it after a
  wall-clock timeout or past a size of answer, and keeps only the tail of what it prints.

What it does not do: it does not hide the read-only system files listed above (a program can
read ``/usr`` and the venv), and it trusts the kernel (a kernel exploit escapes any such jail).

Requirements: ``bwrap`` (Debian/Ubuntu: ``apt-get install bubblewrap``; ``make jail`` does it as
root) and libseccomp through ``pyseccomp`` (the ``llm`` extra). ``status()`` says whether both
work here, and why not.

>>> ALLOWED_ENV[:2]
('PATH', 'HOME')
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: where the private tmpfs is mounted inside the jail (the program's cwd, HOME and TMPDIR)
SANDBOX = "/sandbox"
#: uid and gid the program runs as (nobody)
NOBODY = 65534
#: the only environment variables the program sees (their values: ``environment``)
ALLOWED_ENV = ("PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "OMP_NUM_THREADS",
               "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "SOLAR_IO_LOOPIR_NO_JIT")
INSTALL = ("install bubblewrap (apt-get install bubblewrap, or `make jail`) and pyseccomp "
           "(pip install 'solar-io[llm]')")

#: refused by the first seccomp stage (EPERM): nothing a numerical program needs
DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "mount", "umount2",
          "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
          "mount_setattr", "kexec_load", "kexec_file_load", "bpf", "perf_event_open", "keyctl", "add_key",
          "request_key", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "setns",
          "unshare", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "acct", "quotactl",
          "syslog", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
          "iopl", "ioperm", "name_to_handle_at", "open_by_handle_at", "lookup_dcookie", "vhangup", "uselib",
          "personality", "fanotify_init", "memfd_secret", "landlock_create_ruleset")
#: clone flags that make namespaces (refused in clone; clone3 is answered ENOSYS so libc uses clone)
CLONE_NEW = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)
CLONE_THREAD = 0x00010000
AF_UNIX = 1


@dataclass(frozen=True)
class Status:
    """Whether the jail works here; ``reason`` says why not (and how to install it)."""

    ok: bool
    reason: str
    bwrap: str | None = None
    version: str = ""


def environment(home: str = SANDBOX) -> dict[str, str]:
    """The whole environment of a translated program (every key in ``ALLOWED_ENV``)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "NUMBA_NUM_THREADS": "1", "SOLAR_IO_LOOPIR_NO_JIT": "1"}
    assert tuple(env) == ALLOWED_ENV
    return env


def _seccomp():
    import pyseccomp  # ctypes over libseccomp.so.2

    return pyseccomp


def base_filter():
    """The first seccomp stage (a ``pyseccomp.SyscallFilter``): allow by default, refuse ``DENIED``,
    namespace-making ``clone`` flags and every socket family but AF_UNIX with EPERM."""
    sc = _seccomp()
    f = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        try:
            f.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):  # a syscall this kernel/arch does not have
            continue
    for bit in CLONE_NEW:
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, bit, bit))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    f.add_rule(deny, "socket", sc.Arg(0, sc.NE, AF_UNIX))
    return f


def no_spawn_filter():
    """The second stage, loaded by the runner after its imports: no ``execve``/``execveat``, no
    ``fork``/``vfork``, no ``clone`` without CLONE_THREAD (threads remain, bounded by RLIMIT_NPROC)."""
    sc = _seccomp()
    f = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in ("execve", "execveat", "fork", "vfork"):
        f.add_rule(deny, name)
    f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    return f


def _ro_binds(package_dir: Path) -> list[str]:
    """``--ro-bind``/``--symlink`` arguments for the system, the Python installation and solar_io."""
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    seen: set[str] = set()
    exe = os.path.realpath(sys.executable)
    for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(exe),
              str(package_dir)):
        p = os.path.abspath(p)
        if p in seen or not os.path.isdir(p) or any(p.startswith(s + os.sep) for s in seen) or p.startswith("/usr/"):
            continue
        seen.add(p)
        args += ["--ro-bind", p, p]
        real = os.path.realpath(p)
        if real != p and real not in seen:
            seen.add(real)
            args += ["--ro-bind", real, real]
    # bwrap makes missing parents of a mount point 0700 (root's); nobody must traverse them
    targets = [args[i + 2] for i, a in enumerate(args) if a == "--ro-bind"]
    parents = sorted({str(a) for t in targets for a in Path(t).parents if str(a) != "/"} - set(targets))
    return [x for d in parents for x in ("--perms", "0755", "--dir", d)] + args


def command(bwrap: str, argv: list[str], *, seccomp_fd: int, tmp_size: int, package_dir: Path) -> list[str]:
    """The ``bwrap`` command line running ``argv`` in the jail (``seccomp_fd``: an open file of
    ``base_filter``'s BPF program, passed to the child)."""
    # root: no user namespace; the runner needs only CAP_SETUID/CAP_SETGID to drop to nobody
    user = (["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if os.geteuid() == 0 else
            ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)])
    env: list[str] = ["--clearenv"]
    for k, v in environment().items():
        env += ["--setenv", k, v]
    return [bwrap, *user, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "sandbox", "--die-with-parent", "--new-session", *_ro_binds(package_dir),
            "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(int(tmp_size)), "--tmpfs", SANDBOX,
            "--chdir", SANDBOX, *env, "--seccomp", str(seccomp_fd), "--", *argv]


class OutputTooLarge(RuntimeError):
    """The child wrote more than the answer may hold (it was killed)."""


def run_bounded(cmd: list[str], *, stdin: bytes, timeout: float, max_stdout: int, stderr_tail: int = 1 << 16,
                **popen: object) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)`` with bounded
    memory: stdout over ``max_stdout`` bytes kills the child (OutputTooLarge); of stderr only the
    last ``stderr_tail`` bytes are kept (a program printing without end costs the parent nothing)."""
    import threading

    out, err = bytearray(), bytearray()
    over = threading.Event()
    with subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          **popen) as proc:  # type: ignore[call-overload]
        def feed() -> None:
            try:
                proc.stdin.write(stdin)
                proc.stdin.close()
            except OSError:  # the child exited without reading it all
                pass

        def pump(stream, buf: bytearray, cap: int, tail: bool) -> None:
            while chunk := stream.read1(1 << 16):
                buf += chunk
                if len(buf) > cap:
                    if tail:
                        del buf[:len(buf) - cap]
                    else:
                        over.set()
                        proc.kill()
                        return

        threads = [threading.Thread(target=feed, daemon=True),
                   threading.Thread(target=pump, args=(proc.stdout, out, max_stdout, False), daemon=True),
                   threading.Thread(target=pump, args=(proc.stderr, err, stderr_tail, True), daemon=True)]
        for t in threads:
            t.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        finally:
            for t in threads[1:]:
                t.join(5)
    if over.is_set():
        raise OutputTooLarge(f"the program wrote more than {max_stdout} bytes of output")
    return subprocess.CompletedProcess(cmd, rc, bytes(out), bytes(err))


def run(bwrap: str, argv: list[str], *, stdin: bytes, timeout: float, tmp_size: int, package_dir: Path,
        max_stdout: int = 1 << 30) -> subprocess.CompletedProcess:
    """Run ``argv`` in the jail with ``stdin``; TimeoutExpired after ``timeout`` wall seconds,
    OutputTooLarge past ``max_stdout`` bytes of stdout (see ``run_bounded``)."""
    with tempfile.TemporaryFile() as bpf:
        base_filter().export_bpf(bpf)
        bpf.flush()
        bpf.seek(0)
        fd = bpf.fileno()
        cmd = command(bwrap, argv, seccomp_fd=fd, tmp_size=tmp_size, package_dir=package_dir)
        return run_bounded(cmd, stdin=stdin, timeout=timeout, max_stdout=max_stdout, env=environment("/"),
                           pass_fds=(fd,), start_new_session=True, cwd="/")


@functools.lru_cache(maxsize=1)
def status() -> Status:
    """Whether translated programs can run in the jail here (probed once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Status(False, f"bwrap (bubblewrap) is not installed: {INSTALL}")
    try:
        base_filter()
        no_spawn_filter()
    except Exception as e:  # noqa: BLE001 - ImportError, or libseccomp missing/unusable
        return Status(False, f"seccomp is unavailable ({type(e).__name__}: {' '.join(str(e).split())[:120]}): "
                      f"{INSTALL}", bwrap)
    try:
        ver = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        probe = run(bwrap, [sys.executable, "-I", "-S", "-c", "pass"], stdin=b"", timeout=60, tmp_size=1 << 20,
                    package_dir=Path(__file__).resolve().parents[2])
    except (OSError, subprocess.SubprocessError) as e:
        return Status(False, f"bwrap cannot run here ({e}): {INSTALL}", bwrap)
    if probe.returncode != 0:
        tail = " ".join(probe.stderr.decode(errors="replace").split())[-200:]
        return Status(False, f"bwrap cannot make its namespaces here ({tail or f'exit {probe.returncode}'}); "
                      "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1, or run as root)",
                      bwrap)
    return Status(True, "", bwrap, ver or "bubblewrap")


def unavailable_message(why: str) -> str:
    """The one line for a translated program that cannot be jailed and no --unsafe-exec."""
    return (f"the agent frontend runs translated programs only in its jail, which is unavailable: {why}; "
            "or pass --unsafe-exec to run them with resource limits and an audit hook only")


__all__ = ["ALLOWED_ENV", "DENIED", "NOBODY", "SANDBOX", "OutputTooLarge", "Status", "base_filter", "command",
           "environment", "no_spawn_filter", "run", "run_bounded", "status", "unavailable_message"]
