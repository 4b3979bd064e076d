"""The task-execution engine: local in-process, local process pool and Ray give the same results;
raising, crashing and hanging tasks are retried, then reported, never fatal to the others."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from solar_io.parallel import ExecutorError, TaskResult, check_address, run_tasks, summarize_failures


def square_sum(n: int) -> int:
    """Work whose answer a test derives independently: sum of k^2 for k < n = (n-1)n(2n-1)/6."""
    return sum(k * k for k in range(n))


def fail_on_three(n: int) -> int:
    if n == 3:
        raise ValueError(f"bad item {n}")
    return n * 10


def exit_on_two(n: int) -> int:
    if n == 2:
        os._exit(7)
    return n


def sleep_on_one(n: int) -> int:
    if n == 1:
        time.sleep(120)
    return n


def once_then_succeed(path: str) -> str:
    """Fails its first run (marks a file), succeeds on the retry."""
    p = Path(path)
    if not p.exists():
        p.write_text("seen")
        raise RuntimeError("first attempt fails")
    return "ok"


def pid_of(_: int) -> int:
    return os.getpid()


def _by_index(results: list[TaskResult]) -> list[TaskResult]:
    return sorted(results, key=lambda r: r.index)


ITEMS = [0, 1, 5, 17, 100, 1000]
EXPECTED = [(n - 1) * n * (2 * n - 1) // 6 for n in ITEMS]


@pytest.mark.parametrize("jobs", [1, 2])
def test_local_results_match_closed_form(jobs: int) -> None:
    results = _by_index(list(run_tasks(square_sum, ITEMS, jobs=jobs, progress=False)))
    assert [r.index for r in results] == list(range(len(ITEMS)))
    assert [r.item for r in results] == ITEMS
    assert [r.value for r in results] == EXPECTED
    assert all(r.ok and r.error is None and r.attempts == 1 and r.seconds >= 0 for r in results)


def test_jobs_one_runs_in_process_and_pool_does_not() -> None:
    inline = list(run_tasks(pid_of, [0, 1], jobs=1, progress=False))
    assert {r.value for r in inline} == {os.getpid()}
    pooled = list(run_tasks(pid_of, [0, 1, 2], jobs=2, progress=False))
    assert os.getpid() not in {r.value for r in pooled}


@pytest.mark.parametrize("jobs", [1, 2])
def test_raising_task_is_retried_then_reported(jobs: int) -> None:
    results = _by_index(list(run_tasks(fail_on_three, [1, 2, 3, 4], jobs=jobs, retries=1, progress=False)))
    assert [r.ok for r in results] == [True, True, False, True]
    assert [r.value for r in results] == [10, 20, None, 40]
    bad = results[2]
    assert bad.attempts == 2 and bad.error == "ValueError: bad item 3"
    assert summarize_failures(results) == ["3: ValueError: bad item 3 (2 attempts)"]


def test_retry_that_succeeds_is_ok(tmp_path: Path) -> None:
    marker = str(tmp_path / "marker")
    (r,) = run_tasks(once_then_succeed, [marker], jobs=2, retries=1, progress=False)
    assert r.ok and r.value == "ok" and r.attempts == 2
    (tmp_path / "marker").unlink()
    (r,) = run_tasks(once_then_succeed, [marker], jobs=1, retries=0, progress=False)
    assert not r.ok and r.attempts == 1 and r.error == "RuntimeError: first attempt fails"


def test_worker_crash_is_retried_once_then_reported() -> None:
    results = _by_index(list(run_tasks(exit_on_two, [1, 2, 3, 4, 5], jobs=2, retries=1, progress=False)))
    assert [r.ok for r in results] == [True, False, True, True, True]
    assert [r.value for r in results if r.ok] == [1, 3, 4, 5]
    crashed = results[1]
    assert crashed.attempts == 2
    assert crashed.error == "the worker process died (exit code 7)"


def test_timeout_is_reported_and_others_finish() -> None:
    # 6 s: a fresh worker (forkserver) imports this module within it even on a heavily loaded machine
    # (2.5 s was not always enough with 16 processes on 2 cores)
    results = _by_index(list(run_tasks(sleep_on_one, [0, 1, 2], jobs=1, timeout_s=6, retries=1,
                                       progress=False)))
    assert [r.ok for r in results] == [True, False, True]
    hung = results[1]
    assert hung.attempts == 2 and hung.error == "timed out after 6 s (worker killed)"
    assert 12.0 <= hung.seconds < 120  # two attempts of about 6 s each, not the 120 s sleep


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(ExecutorError, match="unknown executor 'dask'"):
        list(run_tasks(square_sum, [1], executor="dask"))
    with pytest.raises(ExecutorError, match="--jobs: must be at least 1"):
        list(run_tasks(square_sum, [1], jobs=0))
    with pytest.raises(ExecutorError, match="--address is for the ray executor"):
        list(run_tasks(square_sum, [1], address="host:6379"))
    assert list(run_tasks(square_sum, [])) == []


def test_unreachable_ray_address_fails_fast() -> None:
    with socket.socket() as s:  # a local port that nothing listens on once this socket closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ExecutorError, match=rf"--address 127.0.0.1:{port}: cannot reach a Ray cluster there"):
        check_address(f"127.0.0.1:{port}", timeout_s=2.0)
    check_address("auto")  # not HOST:PORT: left to Ray


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.xdist_group("ray")  # one Ray instance (the module fixture) on one worker
def test_ray_matches_local_and_reports_failures(ray_local) -> None:
    local = _by_index(list(run_tasks(square_sum, ITEMS, jobs=2, progress=False)))
    remote = _by_index(list(run_tasks(square_sum, ITEMS, executor="ray", jobs=2, progress=False)))
    assert [(r.index, r.item, r.ok, r.value) for r in remote] == [(r.index, r.item, r.ok, r.value) for r in local]
    assert [r.value for r in remote] == EXPECTED
    failing = _by_index(list(run_tasks(fail_on_three, [3, 4], executor="ray", progress=False)))
    assert [(r.ok, r.attempts, r.error) for r in failing] == [(False, 2, "ValueError: bad item 3"), (True, 1, None)]
    crashed = _by_index(list(run_tasks(exit_on_two, [2, 5], executor="ray", jobs=2, progress=False)))
    assert not crashed[0].ok and crashed[0].attempts == 2
    assert crashed[0].error.startswith("the Ray worker failed: ")
    assert crashed[1].ok and crashed[1].value == 5
    (hung,) = run_tasks(sleep_on_one, [1], executor="ray", timeout_s=2.0, retries=0, progress=False)
    assert (hung.ok, hung.attempts, hung.error) == (False, 1, "timed out after 2 s (Ray task cancelled)")


@pytest.mark.xdist_group("ray")  # one Ray instance (the module fixture) on one worker
def test_sweep_tables_identical_in_process_pool_and_ray(tmp_path: Path, ray_local) -> None:
    """The sweep of a model file (tests/dse/test_sweep.py) gives the same table, failures included, on
    every executor (one Ray instance for the module: it takes seconds to start)."""
    pytest.importorskip("torch")
    from test_sweep import LINEAR

    from solar_io.dse.sweep import run_sweep

    model = tmp_path / "lin.py"
    model.write_text(LINEAR, encoding="utf-8")
    params = {"batch": [3, 128], "d": [256]}
    chips = ["h100-sxm", "a6000"]
    inline = run_sweep(model, params, chips, progress=False)
    assert len(inline.rows) == 1 * 2 * 2 and [p["batch"] for p, _ in inline.failures] == [3]
    assert {r["macs"] for r in inline.rows} == {128 * 256 * 256}
    for kw in ({"jobs": 2}, {"executor": "ray", "jobs": 2}):
        other = run_sweep(model, params, chips, progress=False, **kw)
        assert other.rows == inline.rows, kw
        assert other.failures == inline.failures, kw
