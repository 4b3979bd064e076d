"""One small task-execution engine for sweeps, folder captures and reports.

``run_tasks(fn, items)`` calls ``fn(item)`` for every item and streams a :class:`TaskResult` per
item as each completes (not in item order; ``index`` says which item it was). ``fn`` must be a
picklable top-level function of one argument and the items picklable.

Executors (:data:`EXECUTORS`):

``local``
    A pool of ``jobs`` worker processes (``forkserver`` start method where available, else
    ``spawn``: workers inherit no mutable state from the caller; numeric libraries use one thread
    in each, as in Ray's workers). With ``jobs=1`` and no timeout the tasks run in the calling
    process instead (no process start-up, nothing to pickle); a task that kills that process then
    ends the run, so give ``timeout_s`` or ``jobs>1`` for code that may crash its interpreter.
``ray``
    Ray tasks on the cluster at ``address`` (``ray.init(address=address)``), or on a local Ray
    instance started with ``jobs`` CPUs when Ray is not initialised and no address is given.
    At most ``jobs`` tasks are in flight (``jobs=None``: one per cluster CPU), so a task's time
    limit counts from about when it starts. Ray is imported only here (``pip install
    'solar-io[ray]'``); Ray's own task retries are off, the retries below apply to both executors.

Failures never stop the other tasks: a task that raises, runs past ``timeout_s`` (its worker
process is killed) or whose worker process dies is run again up to ``retries`` more times, then
reported with ``ok=False`` and the reason in ``error``. :func:`summarize_failures` turns the
failed results into one line each.

The parts, one job each: :mod:`.tasks` (a task's result, its attempts and retries), :mod:`.local`
(the process pool), :mod:`.on_ray` (Ray tasks) and :mod:`.run` (the entry point).
"""

from solar_io.parallel.on_ray import check_address, ray_task
from solar_io.parallel.run import EXECUTORS, run_tasks, summarize_failures
from solar_io.parallel.tasks import ExecutorError, TaskResult, call_task, describe_error

__all__ = ["EXECUTORS", "ExecutorError", "TaskResult", "call_task", "check_address", "describe_error", "ray_task",
           "run_tasks", "summarize_failures"]
