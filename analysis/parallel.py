"""Independent pieces of an analysis run side by side in forked processes: the figures, and the mixed
models' fits.

A fork inherits the parent's modules and data, so a job is any function of no arguments, and nothing
is imported again or pickled on the way in (only each job's result is pickled on the way back).
Before forking, the parent's objects are moved out of the garbage collector's reach (gc.freeze):
otherwise the first collection in each child walks every object the parent has, which copies the
memory pages they live on and cost about a sixth of the figures' time. They are handed back after.

Each forked process uses one BLAS thread (threadpoolctl), so that they do not oversubscribe the cores.
Jobs run in this process instead where forking does not pay or is not safe: a single job or a single
core, a platform without fork, a process with another thread (which a fork could copy in the middle
of holding a lock), and inside a forked child itself.
"""

import gc
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import threadpoolctl

# The jobs of the pool that is running: set before its processes fork, so that each inherits them.
_jobs: list[Callable[[], object]] = []
_in_child = False


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    return (
        not _in_child
        and threading.active_count() == 1
        and "fork" in multiprocessing.get_all_start_methods()
        and cores() > 1
    )


def run_all[T](jobs: list[Callable[[], T]]) -> list[T]:
    """Each job's result, in the jobs' order: run in forked processes (one per core, each taking the
    next job as it finishes one) where that pays, here otherwise. A job's exception is raised here."""
    global _jobs
    workers = min(len(jobs), cores())
    if workers < 2 or not can_fork():
        return [job() for job in jobs]
    _jobs = list(jobs)
    gc.freeze()
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_child) as pool:
            return list(pool.map(_run, range(len(jobs))))
    finally:
        _jobs = []
        gc.unfreeze()


def _child() -> None:
    global _in_child
    _in_child = True
    # One BLAS thread per process: each forked process would otherwise run as many as there are cores,
    # which then wait on each other (the mixed models' fits took 60% longer side by side than in turn).
    threadpoolctl.threadpool_limits(1)


def _run(index: int):
    return _jobs[index]()
