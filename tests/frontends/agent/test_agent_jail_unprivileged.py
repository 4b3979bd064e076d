"""The jail started by an unprivileged user (issue 20): the path where bwrap makes a user namespace.

``test_agent_jail.py`` runs the jail as this machine's root (bwrap keeps the host user namespace and
the runner drops to nobody). Here the whole agent path (``run_program``: the parent, bwrap, the
runner) runs as uid/gid 65534 with no groups, dropped with ``setpriv``, and the same escapes must
fail: writes outside the jail to files that *this user may write* outside it, a shell through
``ctypes``, the parent's environment through ``/proc``, the network, ``fork``; and the program runs
as nobody without capabilities inside its namespace. The interpreter lives under root's 0700 home
here, so the test runs the unprivileged side in a private mount namespace (``unshare -m``) where a
0755 tmpfs covers ``/root`` and the Python installation is bound back at the same path; nothing
outside that namespace changes. Skipped, with the reason, where it cannot run: not root (no user
to drop to), no ``unshare``/``setpriv``, the kernel forbids unprivileged user namespaces, or the
jail is unavailable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

import solar_io
from solar_io.frontends.agent import jail

NOBODY = jail.NOBODY
PACKAGE = Path(solar_io.__file__).resolve().parent
SITE = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()))
ROOT = PACKAGE.parent
SECRET = "sk-ant-unprivileged-jail-SECRET-" + uuid.uuid4().hex


def _why_not() -> str | None:
    """Why the unprivileged path cannot be tested here (one line), or None."""
    if os.geteuid() != 0:
        return "needs root to drop to uid 65534 (the unprivileged path is then the one in use: test_agent_jail.py)"
    for tool in ("unshare", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} (util-linux) is not installed"
    if not jail.status().ok:
        return f"the agent jail is unavailable: {jail.status().reason}"
    for knob, off in (("/proc/sys/kernel/unprivileged_userns_clone", "0"), ("/proc/sys/user/max_user_namespaces", "0"),
                      ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1")):
        try:
            if Path(knob).read_text().strip() == off:
                return f"the kernel forbids unprivileged user namespaces ({knob} = {off})"
        except OSError:
            continue
    return None


WHY_NOT = _why_not()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))

#: run as nobody: each probe's error text (or its failure to report), and what nobody may do outside
DRIVER = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from solar_io.frontends.agent import jail
from solar_io.frontends.agent.sandbox import run_program

targets = json.loads(sys.argv[2])
out = {"uid": [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()], "status": jail.status().reason,
       "writable_outside": {k: os.access(p, os.W_OK) for k, p in targets.items() if k != "dir"}}
os.environ["ANTHROPIC_API_KEY"] = os.environ["SOLAR_IO_JAIL_SECRET"]
LIBC = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
PROBES = {
    "writes": LIBC + '''
out = []
for p in %r:
    b = p.encode()
    out.append(('truncate', libc.truncate(b, 0), ctypes.get_errno()))
    out.append(('open-trunc', libc.open(b, os.O_WRONLY | os.O_TRUNC), ctypes.get_errno()))
    out.append(('rename', libc.rename(b, (p + '.moved').encode()), ctypes.get_errno()))
    out.append(('unlink', libc.unlink(b), ctypes.get_errno()))
out.append(('create', libc.open(%r.encode(), os.O_WRONLY | os.O_CREAT, 0o644), ctypes.get_errno()))
raise RuntimeError('RESULT ' + repr(out))
''' % ([targets["victim"], targets["package"], targets["site"]], targets["dir"] + "/new.txt"),
    "shell": LIBC + '''
rc = libc.system(b"echo escaped > %s/shell.txt")
pid = libc.fork()
raise RuntimeError(f'RESULT system={rc} fork={pid} errno={ctypes.get_errno()}')
''' % targets["dir"],
    "environ": LIBC + '''
def read(path):
    fd = libc.open(path.encode(), os.O_RDONLY)
    if fd < 0:
        return 'errno%d' % ctypes.get_errno()
    data = os.read(fd, 1 << 20)
    os.close(fd)
    return 'LEAK' if b'SECRET' in data or b'ANTHROPIC' in data else 'clean'
seen = [p + ':' + read(f'/proc/{p}/environ') for p in [str(os.getppid()), '1', 'self']]
raise RuntimeError('RESULT env=' + ','.join(sorted(os.environ)) + ' ' + ' '.join(seen))
''',
    "network": LIBC + '''
s = libc.socket(2, 1, 0)
raise RuntimeError(f'RESULT socket={s} errno={ctypes.get_errno()}')
''',
    "identity": LIBC + '''
fd = libc.open(b'/proc/self/status', os.O_RDONLY)  # libc: the audit hook refuses Python's open of /proc
text = os.read(fd, 1 << 16).decode()
caps = [l.split()[1] for l in text.splitlines() if l.startswith(('CapEff', 'CapPrm'))]
raise RuntimeError(f'RESULT uid={os.getuid()} gid={os.getgid()} caps={",".join(caps)}')
''',
}
for name, code in PROBES.items():
    r = run_program(code, {}, timeout=60)
    out[name] = r.error or ("no error: " + (r.traceback or ""))
print(json.dumps(out))
"""

PRIVATE_ROOT = r"""
set -e
mount --bind "$SOLAR_IO_PYHOME" "$STASH"
mount -t tmpfs -o mode=0755,size=1m tmpfs "$HOMEDIR"
mkdir -p "$SOLAR_IO_PYHOME"
mount --bind "$STASH" "$SOLAR_IO_PYHOME"
exec setpriv --reuid 65534 --regid 65534 --clear-groups "$@"
"""


def _interpreter_home() -> Path | None:
    """The top directory of the Python installation when it sits in a home nobody cannot traverse."""
    real = Path(os.path.realpath(sys.executable))
    for parent in real.parents:
        if parent != Path("/") and not os.stat(parent).st_mode & 0o001:
            return parent
    return None


@pytest.fixture
def targets():
    """Files nobody may write outside the jail: one in a nobody-owned folder that the jail does not
    bind, and nobody-owned files inside the read-only binds (the solar_io package, site-packages)."""
    work = Path(tempfile.mkdtemp(prefix="solar-io-nobody-", dir="/tmp"))
    work.chmod(0o755)
    own = work / "own"
    own.mkdir()
    tag = uuid.uuid4().hex
    files = {"victim": own / "victim.txt", "package": PACKAGE / f".jail_nobody_{tag}.txt",
             "site": SITE / f".jail_nobody_{tag}.txt"}
    for p in files.values():
        p.write_text("keep me\n")
        os.chown(p, NOBODY, NOBODY)
    os.chown(own, NOBODY, NOBODY)
    yield work, {"dir": str(own), **{k: str(p) for k, p in files.items()}}
    for p in files.values():
        for q in (p, Path(str(p) + ".moved")):
            q.unlink(missing_ok=True)
    shutil.rmtree(work, ignore_errors=True)


def test_escapes_fail_in_the_jail_started_unprivileged(targets) -> None:
    work, paths = targets
    driver = work / "driver.py"
    driver.write_text(DRIVER)
    driver.chmod(0o644)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8", "SOLAR_IO_JAIL_SECRET": SECRET}
    cmd = [sys.executable, str(driver), str(ROOT), json.dumps(paths)]
    home = _interpreter_home()
    if home is None:
        argv = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups", *cmd]
    else:  # a private mount namespace where nobody can reach the interpreter (see the module docstring)
        py_home = Path(os.path.realpath(sys.executable)).relative_to(home).parts[0]
        stash = work / "stash"
        stash.mkdir()
        env.update(SOLAR_IO_PYHOME=str(home / py_home), STASH=str(stash), HOMEDIR=str(home))
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", PRIVATE_ROOT, "sh", *cmd]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, cwd=str(work))
    if r.returncode != 0 and "unshare failed" in r.stderr:
        pytest.skip(f"cannot make a private mount namespace here: {r.stderr.strip()[-200:]}")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["uid"] == [NOBODY, NOBODY, NOBODY, []]  # the whole agent path ran unprivileged
    assert out["status"] == ""  # and found the jail usable: bwrap made its user namespace
    assert all(out["writable_outside"].values()), out["writable_outside"]  # nobody may write them outside

    writes = out["writes"]
    assert "RESULT" in writes and writes.count(", -1, ") == 13, writes  # 3 files x 4 calls and the create
    for p in ("victim", "package", "site"):
        assert Path(paths[p]).read_text() == "keep me\n" and not Path(paths[p] + ".moved").exists()
    assert not (Path(paths["dir"]) / "new.txt").exists()

    shell = out["shell"]
    assert "RESULT" in shell and "fork=-1" in shell and "system=0" not in shell, shell
    assert not (Path(paths["dir"]) / "shell.txt").exists()

    environ = out["environ"]
    assert "RESULT" in environ and "LEAK" not in environ and SECRET not in environ, environ
    seen = set(environ.split("env=")[1].split()[0].split(","))
    assert seen <= {*jail.ALLOWED_ENV, "PWD"} and "ANTHROPIC_API_KEY" not in seen, seen

    network = out["network"]
    assert "RESULT socket=-1" in network, network

    identity = out["identity"]
    assert f"RESULT uid={NOBODY} gid={NOBODY} caps=0000000000000000,0000000000000000" in identity, identity
