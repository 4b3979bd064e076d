"""The jail model-written programs run in (solar_io/frontends/agent/jail.py): every escape a
translated program could try must fail inside it. Each escape goes through ``ctypes`` (libc
directly) where Python's own call would be stopped by the audit hook first, so what is tested
is the operating system's jail, not the hook. Skipped, with the reason, where bwrap or
libseccomp is not installed (``make jail``)."""

from __future__ import annotations

import os
import socket
import sys
import uuid
from pathlib import Path

import pytest
from paths import TESTS

import solar_io
from solar_io.frontends.agent import jail
from solar_io.frontends.agent.sandbox import JailUnavailable, require_jail, run_program

needs_jail = pytest.mark.skipif(not jail.status().ok, reason=f"the agent jail is unavailable: {jail.status().reason}")
x86_64 = pytest.mark.skipif(os.uname().machine != "x86_64", reason="raw syscall numbers are x86_64's")

PACKAGE = Path(solar_io.__file__).resolve().parent  # bound read-only inside the jail
SITE = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()))
SECRET = "sk-ant-jail-test-SECRET-" + uuid.uuid4().hex

LIBC = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"


def _fails(code: str, **kw) -> str:
    """Run ``code`` in the jail; it must end by raising ``RuntimeError('RESULT ...')``; the text."""
    r = run_program(code, {}, timeout=30, **kw)
    assert not r.ok, "the probe program must report through an exception"
    assert "RESULT" in r.error, r.error
    return r.error


@pytest.fixture
def probe_file():
    """A file visible inside the jail (in the read-only solar_io package) and one outside it."""
    p = PACKAGE / f".jail_probe_{uuid.uuid4().hex}.txt"
    p.write_text("keep me\n")
    yield p
    for q in (p, p.with_suffix(".moved")):
        q.unlink(missing_ok=True)


@needs_jail
def test_truncate_rename_delete_outside_fail(probe_file, tmp_path):
    hidden = tmp_path / "outside.txt"  # not bound at all
    hidden.write_text("keep me\n")
    code = LIBC + f"""
out = []
for p in ({str(probe_file)!r}, {str(hidden)!r}):
    b = p.encode()
    out.append(('truncate', libc.truncate(b, 0), ctypes.get_errno()))
    fd = libc.open(b, os.O_WRONLY | os.O_TRUNC)
    out.append(('open-trunc', fd, ctypes.get_errno()))
    out.append(('rename', libc.rename(b, (p + '.moved').encode()), ctypes.get_errno()))
    out.append(('unlink', libc.unlink(b), ctypes.get_errno()))
raise RuntimeError('RESULT ' + repr(out))
"""
    text = _fails(code)
    assert text.count(", -1, ") == 8, text  # every call failed
    assert probe_file.read_text() == "keep me\n" and hidden.read_text() == "keep me\n"
    assert not probe_file.with_suffix(".moved").exists()


@needs_jail
def test_shell_through_ctypes_fails(tmp_path):
    marker_in, marker_out = PACKAGE / f".jail_marker_{uuid.uuid4().hex}", tmp_path / "marker"
    code = LIBC + f"""
rc = libc.system(b"echo escaped > {marker_in}; echo escaped > {marker_out}; echo escaped > /tmp/m")
pid = libc.fork()
raise RuntimeError(f'RESULT system={{rc}} fork={{pid}} errno={{ctypes.get_errno()}}')
"""
    try:
        text = _fails(code)
        assert "fork=-1" in text and "system=0" not in text, text
        assert not marker_in.exists() and not marker_out.exists()
    finally:
        marker_in.unlink(missing_ok=True)


@needs_jail
def test_parent_environment_is_not_readable(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("SOLAR_IO_JAIL_SECRET", SECRET)
    code = LIBC + """
def read(path):  # libc's open: the audit hook sees no Python open
    fd = libc.open(path.encode(), os.O_RDONLY)
    if fd < 0:
        return 'errno %d' % ctypes.get_errno()
    data = os.read(fd, 1 << 20)
    os.close(fd)
    return data.decode(errors='replace').replace(chr(0), ' ')

seen = ['env=' + ','.join(sorted(os.environ))]
for pid in [str(os.getppid()), 'self'] + sorted(p for p in os.listdir('/proc') if p.isdigit()):
    data = read(f'/proc/{pid}/environ')  # compact: the error line holds 300 characters
    leak = 'sk-ant-jail-test-SECRET' in data or 'ANTHROPIC_API_KEY' in data
    seen.append(pid + ':' + (data if data.startswith('errno') else 'LEAK' if leak else 'clean'))
pids = sorted(p for p in os.listdir('/proc') if p.isdigit())
raise RuntimeError('RESULT pids=' + ','.join(pids) + ' init=' + read('/proc/1/cmdline').split()[0] + ' '
                   + ' '.join(seen).replace(chr(10), ' '))
"""
    r = run_program(code, {}, timeout=30)
    text = r.error + (r.traceback or "")
    assert "RESULT" in text and "init=/usr/bin/bwrap " in text  # the reads work: /proc is the jail's, pid 1 its init
    env = set(text.split("env=")[1].split()[0].split(","))
    assert env <= {*jail.ALLOWED_ENV, "PWD"}, env  # its own environment is the allow-list (bwrap adds PWD)
    reads = text.split("env=")[1].split()[1:]
    assert len(reads) >= 3 and not any("LEAK" in x for x in reads), reads
    assert SECRET not in text and "ANTHROPIC_API_KEY" not in text
    pids = text.split("pids=")[1].split()[0].split(",")
    assert len(pids) <= 3, pids  # a fresh /proc: the jail's init and the program only
    assert set(os.environ) - set(jail.ALLOWED_ENV)  # the parent does have more than the allow-list


@needs_jail
def test_venv_pth_and_checkout_writes_fail():
    pth = SITE / f"zz_jail_test_{uuid.uuid4().hex}.pth"
    checkout = PACKAGE / f"zz_jail_test_{uuid.uuid4().hex}.py"
    code = LIBC + f"""
out = []
for p in ({str(pth)!r}, {str(checkout)!r}, {str(PACKAGE.parent / 'zz_jail_test')!r}):
    fd = libc.open(p.encode(), os.O_WRONLY | os.O_CREAT, 0o644)
    out.append((p, fd, ctypes.get_errno()))
    try:
        open(p, 'w').write('import os\\n')
        out.append('python open succeeded')
    except OSError as e:
        out.append(type(e).__name__)
raise RuntimeError('RESULT ' + repr(out))
"""
    try:
        text = _fails(code)
        assert text.count(", -1, ") == 3 and "succeeded" not in text, text
        assert not pth.exists() and not checkout.exists()
    finally:
        pth.unlink(missing_ok=True)
        checkout.unlink(missing_ok=True)


@needs_jail
def test_network_connect_fails():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    port = server.getsockname()[1]
    code = LIBC + f"""
import struct
s = libc.socket(2, 1, 0)  # AF_INET, SOCK_STREAM
e1 = ctypes.get_errno()
addr = struct.pack('=H', 2) + struct.pack('!H', {port}) + bytes([127, 0, 0, 1]) + bytes(8)  # sockaddr_in
rc = libc.connect(s, addr, len(addr)) if s >= 0 else -1
raise RuntimeError(f'RESULT socket={{s}} errno={{e1}} connect={{rc}}')
"""
    try:
        text = _fails(code)
        assert "socket=-1" in text and "connect=-1" in text, text
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    finally:
        server.close()


@needs_jail
def test_fork_bomb_is_bounded():
    """fork (through libc: Python's os.fork is refused by the audit hook already) is refused by
    seccomp; threads are bounded by the process limit of the jail's user."""
    code = LIBC + """
import threading, time
forks = 0
while forks < 10000 and libc.fork() >= 0:
    forks += 1
fork_errno = ctypes.get_errno()
threads = 0
try:
    while threads < 10000:
        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()
        threads += 1
except RuntimeError:
    pass
raise RuntimeError(f'RESULT forks={forks} errno={fork_errno} threads={threads}')
"""
    text = _fails(code, processes=16)
    assert "forks=0 errno=1 " in text, text
    threads = int(text.split("threads=")[1].split()[0])
    assert threads < 16, text  # RLIMIT_NPROC: the jail's user may hold 16 tasks


@needs_jail
def test_writing_10_gb_stops_at_the_file_size_limit():
    code = """
written = 0
try:
    with open('big', 'wb') as f:
        chunk = b'\\0' * (1 << 20)
        for _ in range(10 * 1024):
            f.write(chunk)
            written += len(chunk)
except OSError as e:
    err = type(e).__name__ + ' ' + str(e.errno)
try:
    with open('sparse', 'wb') as f:
        f.seek(10 << 30)
        f.write(b'x')
    sparse = 'written'
except OSError as e:
    sparse = str(e.errno)
raise RuntimeError(f'RESULT written={written} {err} sparse={sparse}')
"""
    text = _fails(code, file_size=8 << 20)
    written = int(text.split("written=")[1].split()[0])
    assert written <= 8 << 20 and "sparse=27" in text, text  # EFBIG


@needs_jail
def test_infinite_loop_stops_at_the_cpu_time_limit():
    r = run_program("while True:\n    pass\n", {}, timeout=120, cpu_time=1)
    assert not r.ok and "CPU-time limit of 1 s" in r.error, r.error


@needs_jail
@x86_64
def test_seccomp_refuses_ptrace_mount_bpf_keyctl_unshare():
    code = LIBC + """
fd = libc.open(b'/proc/self/status', 0)
status = os.read(fd, 1 << 16).decode()
out = {'filters': status.split('Seccomp_filters:')[1].split()[0]}
for name, args in (('ptrace', (16, 1, 0, 0)), ('mount', (b'none', b'/sandbox', b'tmpfs', 0, None)),
                   ('unshare', (0x10000000,)), ('setns', (0, 0))):
    out[name] = (getattr(libc, name)(*args), ctypes.get_errno())
sysc = libc.syscall
out['bpf'] = (sysc(321, 0, None, 0), ctypes.get_errno())
out['keyctl'] = (sysc(250, 0, 0, 0), ctypes.get_errno())
out['kexec_load'] = (sysc(246, 0, 0, None, 0), ctypes.get_errno())
raise RuntimeError('RESULT ' + repr(out))
"""
    text = _fails(code)
    for name in ("ptrace", "mount", "unshare", "setns", "bpf", "keyctl", "kexec_load"):
        assert f"'{name}': (-1, 1)" in text, text  # EPERM from the filter
    assert "'filters': '2'" in text  # both stages are loaded


def test_no_jail_refuses_unless_unsafe(monkeypatch):
    monkeypatch.setattr(jail, "status", lambda: jail.Status(False, "bwrap (bubblewrap) is not installed: "
                                                              + jail.INSTALL))
    with pytest.raises(JailUnavailable, match="apt-get install bubblewrap.*--unsafe-exec"):
        run_program("x = 1\n", {})
    assert require_jail(unsafe=True).ok is False


def test_cli_without_jail_is_one_line_naming_unsafe_exec(monkeypatch, capsys, tmp_path):
    from solar_io.cli.main import main

    here = TESTS / "agent_replays"
    monkeypatch.setattr(jail, "status", lambda: jail.Status(False, "bwrap (bubblewrap) is not installed: "
                                                              + jail.INSTALL))
    monkeypatch.setenv("SOLAR_IO_AGENT_REPLAY", str(here / "layernorm_np_first_try.json"))
    monkeypatch.setenv("SOLAR_IO_CACHE", str(tmp_path))
    with pytest.raises(SystemExit) as e:
        main(["capture", str(here / "layernorm_np.py"), "--frontend", "agent"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1 and "--unsafe-exec" in err
    assert "apt-get install bubblewrap" in err
    with pytest.raises(SystemExit) as ok:  # main() exits with the status, 0 on success
        main(["capture", str(here / "layernorm_np.py"), "--frontend", "agent", "--unsafe-exec", "-o",
              str(tmp_path / "g.yaml")])
    assert ok.value.code == 0
    assert "unjailed child process (--unsafe-exec" in (tmp_path / "g.yaml").read_text()


@needs_jail
def test_lifting_runs_the_module_body_in_the_jail_too(tmp_path):
    """The lifter imports the program (its module body is model-written code): that happens in
    the jail as well, so a body that writes outside gets nowhere and the graph still comes back."""
    import json

    from solar_io.frontends.agent.translate import extract_code, lift_code

    here = TESTS / "agent_replays"
    good = extract_code(json.loads((here / "layernorm_np_first_try.json").read_text())["replies"][0]["text"])
    marker = tmp_path / "lifted_marker"
    evil = LIBC + f"libc.open({str(marker).encode()!r}, os.O_WRONLY | os.O_CREAT, 0o644)\n" + good
    g = lift_code(evil, here / "layernorm_np.py")
    assert g.name == "layernorm_np" and any(n.reduce == "add" for n in g.nodes)
    assert not marker.exists()


def test_status_names_the_missing_tool(monkeypatch):
    monkeypatch.setattr(jail.shutil, "which", lambda name: None)
    jail.status.cache_clear()
    try:
        st = jail.status()
        assert not st.ok and "bwrap (bubblewrap) is not installed" in st.reason and "apt-get install" in st.reason
    finally:
        monkeypatch.undo()
        jail.status.cache_clear()


@needs_jail
def test_the_user_namespace_form_runs(monkeypatch):
    """Started by a user other than root, bwrap makes a user namespace in which the program is
    uid 65534 (here root stands in for that user: the command and the runner take that path)."""
    monkeypatch.setattr(jail.os, "geteuid", lambda: 1000)
    cmd = jail.command("bwrap", ["true"], seccomp_fd=3, tmp_size=1 << 20, package_dir=PACKAGE)
    assert cmd[1:6] == ["--unshare-user", "--uid", "65534", "--gid", "65534"] and "--cap-add" not in cmd
    r = run_program("x = 1\n", {}, timeout=30)
    assert not r.ok and "no model" in r.error and r.isolation["uid"] == jail.NOBODY
    assert r.isolation["seccomp"] == "jail" and int(r.isolation["capabilities"], 16) == 0


@needs_jail
def test_output_floods_cost_the_parent_nothing():
    """What a program prints is kept only as a tail; an answer past its limit kills the program."""
    noisy = "import os\nfor _ in range(64):\n    os.write(2, b'x' * (1 << 20))\nraise RuntimeError('RESULT done')\n"
    assert "RESULT done" in _fails(noisy)  # 64 MiB on stderr: the run still reports
    flood = LIBC + ("for fd in range(3, 12):\n    try:\n        os.write(fd, b'y' * (4 << 20))\n"
                    "    except OSError:\n        pass\nraise RuntimeError('RESULT flooded')\n")
    r = run_program(flood, {}, timeout=30, max_output=1 << 20)
    assert not r.ok and "more than 1048576 bytes" in r.error, r.error


def test_agent_fallback_without_jail_stops_before_capturing(monkeypatch, capsys):
    pytest.importorskip("torch")
    from solar_io.cli.main import main

    monkeypatch.setattr(jail, "status", lambda: jail.Status(False, "bwrap (bubblewrap) is not installed: "
                                                              + jail.INSTALL))
    model = TESTS / "agent_replays" / "custom_op_torch.py"
    with pytest.raises(SystemExit) as e:
        main(["capture", str(model), "--agent-fallback"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1 and "--unsafe-exec" in err


@needs_jail
def test_only_the_private_tmpfs_is_writable():
    dirs = ["/", "/dev", "/dev/shm", "/usr", "/tmp", "/etc", sys.prefix, str(PACKAGE), os.path.expanduser("~"),
            jail.SANDBOX]
    code = LIBC + f"""
res = []
for d in {dirs!r}:
    fd = libc.open((d + '/jail_probe_{uuid.uuid4().hex}').encode(), os.O_CREAT | os.O_WRONLY, 0o600)
    res.append(d + '=' + ('written' if fd >= 0 else 'refused'))
raise RuntimeError('RESULT ' + ' '.join(res))
"""
    got = dict(x.split("=") for x in _fails(code).split("RESULT ")[1].split())
    assert got.pop(jail.SANDBOX) == "written" and set(got.values()) == {"refused"}, got
