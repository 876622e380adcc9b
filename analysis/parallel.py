"""Independent pieces of an analysis run side by side in forked processes: the figures, and the mixed
models' fits. A command can also start its processes early (early_processes), before it imports the
jobs' libraries: see run_beside.

A fork inherits the parent's modules and data, so a job is any function of no arguments, and nothing
is imported again or pickled on the way in (only each job's result is pickled on the way back).
Before forking, the parent's objects are moved out of the garbage collector's reach (gc.freeze):
otherwise the first collection in each child walks every object the parent has, which copies the
memory pages they live on and cost about a sixth of the figures' time. They are handed back after.

Each forked process uses one BLAS thread (threadpoolctl), so that they do not oversubscribe the cores.
Jobs run in this process instead where forking does not pay or is not safe: a single job or a single
core, a platform without fork, a process with another thread (which a fork could copy in the middle
of holding a lock), and inside a forked child itself. A thread that can stop while the processes are
forked and go on after (the worker's heartbeat: exports.tasks.BuildMonitor) does not prevent it: see
stopped_for_forks. Nor does PostgreSQL's connection pool (psycopg's, with a scheduler and worker
threads of its own): it is closed before forking, unless a connection is in a transaction, and the
next query opens it again.
"""

import gc
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from typing import Protocol

import threadpoolctl

# The jobs of the pool that is running: set before its processes fork, so that each inherits them.
_jobs: list[Callable[[], object]] = []
_in_child = False


class Pausable(Protocol):
    """Something that runs a thread of its own (None when it has none) and can stop it for a while."""

    @property
    def thread(self) -> threading.Thread | None: ...

    def paused(self) -> AbstractContextManager[None]: ...


_pausable: list[Pausable] = []


@contextmanager
def stopped_for_forks(owner: Pausable) -> Iterator[None]:
    """Within it, run_all forks although `owner`'s thread runs: the thread is stopped (owner.paused())
    while the processes are forked, and goes on beside them after."""
    _pausable.append(owner)
    try:
        yield
    finally:
        _pausable.remove(owner)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Whether run_all may fork: not in a forked child, on a platform with fork and more than one core,
    and no thread here but this one and those that stop for forks."""
    pausing = {owner.thread for owner in _pausable}
    others = [thread for thread in threading.enumerate() if thread is not threading.current_thread()]
    return (
        not _in_child
        and all(thread in pausing for thread in others)
        and "fork" in multiprocessing.get_all_start_methods()
        and cores() > 1
    )


def close_database_pools() -> None:
    """Close this process's PostgreSQL connection pools, whose threads would keep run_all from forking,
    unless one of this thread's connections is in a transaction (closing it would end the transaction).
    The next query opens a pool again. Nothing to close on SQLite, or where no query ran."""
    from django.db import connections

    pooled = [c for c in connections.all() if c.alias in getattr(c, "_connection_pools", {})]
    if any(c.in_atomic_block for c in pooled):
        return
    for wrapper in pooled:
        wrapper.close()  # this thread's connection back to its pool, which then closes it
        wrapper.close_pool()


def run_all[T](jobs: list[Callable[[], T]]) -> list[T]:
    """Each job's result, in the jobs' order: run in forked processes (one per core, each taking the
    next job as it finishes one) where that pays, here otherwise. A job's exception is raised here."""
    workers = min(len(jobs), cores())
    if workers < 2 or _in_child or "fork" not in multiprocessing.get_all_start_methods():
        return [job() for job in jobs]
    done = _forked(jobs, workers)
    return done if done is not None else [job() for job in jobs]


def _forked[T](jobs: list[Callable[[], T]], workers: int) -> list[T] | None:
    """The jobs' results from `workers` forked processes; None, having run nothing, where a thread
    other than those that stop for forks runs here."""
    with _forking(jobs, workers) as futures:
        return None if futures is None else _results(futures)


@contextmanager
def _forking[T](jobs: list[Callable[[], T]], workers: int) -> Iterator[list | None]:
    """The jobs submitted to `workers` processes forked from this one: their futures, or None, having
    run nothing, where a thread other than those that stop for forks runs here. The processes end
    with the block."""
    global _jobs
    _jobs = list(jobs)
    gc.freeze()
    try:
        with ExitStack() as forked:
            with ExitStack() as paused:
                for owner in _pausable:
                    paused.enter_context(owner.paused())
                # With the owners' threads stopped nobody else queries, so no pool opens before the fork.
                close_database_pools()
                if not can_fork():
                    yield None
                    return
                context = multiprocessing.get_context("fork")
                pool = forked.enter_context(
                    ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_child)
                )
                # With fork, the pool starts all its processes at its first job, before the thread of its
                # own that it then starts (forking beside a thread is what it avoids, too).
                futures = [pool.submit(_run, 0)]
            futures += [pool.submit(_run, index) for index in range(1, len(jobs))]
            try:
                yield futures
            finally:
                for future in futures:
                    future.cancel()  # after a job's exception, those not started are not run
    finally:
        _jobs = []
        gc.unfreeze()


def _results(futures: list) -> list:
    return [future.result() for future in futures]


def forked_beside[T, U](jobs: list[Callable[[], T]], here: list[Callable[[], U]]) -> tuple[list[T], list[U]]:
    """The results of `jobs` and of `here`, each in order: `jobs` in processes forked from this one now
    (they inherit its data: nothing is pickled on the way in), on the cores `here` leaves, while `here`
    runs in this process with one BLAS thread. Where run_all would not fork, all run here in turn.
    A job's exception is raised here."""
    workers = min(len(jobs), cores() - 1)
    if workers < 1 or _in_child or "fork" not in multiprocessing.get_all_start_methods():
        return [job() for job in jobs], [job() for job in here]
    with _forking(jobs, workers) as futures:
        if futures is None:
            return [job() for job in jobs], [job() for job in here]
        with threadpoolctl.threadpool_limits(1):
            beside = [job() for job in here]
        return _results(futures), beside


class _EarlyProcess:
    """A process forked at once that runs `ready`, then takes lists of jobs over a pipe and runs each
    list as run_all does (forking in turn), sending the results back. A plain process and a pipe: no
    thread here (a process pool's would keep this process from forking beside it, forked_beside)."""

    def __init__(self, ready: Callable[[], None]) -> None:
        context = multiprocessing.get_context("fork")
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs, ready))  # not a daemon: it forks
        self.process.start()
        theirs.close()
        self.pending = False

    def submit(self, jobs: list[Callable[[], object]]) -> None:
        self.connection.send(jobs)
        self.pending = True

    def result(self) -> list:
        self.pending = False
        try:
            ok, value = self.connection.recv()
        except EOFError:
            raise RuntimeError("the process started early ended before sending its results") from None
        if not ok:
            raise value
        return value

    def settle(self) -> None:
        """Wait for the jobs sent last if their results were not asked for (another exception is on its
        way up), so that the next results are the next jobs'."""
        if self.pending:
            with suppress(Exception):
                self.result()

    def close(self) -> None:
        self.settle()  # a job still running is waited for, as a pool's shutdown does
        with suppress(OSError):  # unless the process has ended already
            self.connection.send(None)
        self.connection.close()
        self.process.join()


def _serve(connection, ready: Callable[[], None]) -> None:
    """The early process: `ready`, then each list of jobs run as run_all does, until None or the pipe ends."""
    ready()
    while True:
        try:
            jobs = connection.recv()
        except EOFError:
            return
        if jobs is None:
            return
        try:
            answer = (True, run_all(jobs))
        except Exception as error:  # sent back, and raised there
            answer = (False, error)
        connection.send(answer)


# The process started early (early_processes), which run_beside sends jobs to while it is there.
_early: _EarlyProcess | None = None


@contextmanager
def early_processes(ready: Callable[[], None]) -> Iterator[None]:
    """Within it, run_beside sends its jobs to a process forked on entering it, which first runs
    `ready` (imports what the jobs need) on the core this process leaves idle while it goes on,
    importing and computing what the jobs will be given. The jobs are pickled on their way there, and
    that process runs them as run_all does: forked side by side (one process per core, each inheriting
    what `ready` imported), their results pickled on the way back. Nothing is started where run_all
    would not fork (can_fork), nor within another early_processes; run_beside then runs as run_all does.
    It runs no thread here, so this process can still fork beside it (forked_beside)."""
    global _early
    early = None
    if _early is None:
        with ExitStack() as paused:  # as _forked: the threads that stop for forks, stopped
            for owner in _pausable:
                paused.enter_context(owner.paused())
            close_database_pools()
            if can_fork():
                early = _EarlyProcess(ready)
    if early is None:
        yield
        return
    _early = early
    try:
        yield
    finally:
        _early = None
        early.close()


def early_processes_started() -> bool:
    return _early is not None


def run_beside[T, U](jobs: list[Callable[[], T]], here: list[Callable[[], U]]) -> tuple[list[T], list[U]]:
    """The results of `jobs` and of `here`, each in order. Where early_processes started a process,
    `jobs` go to it (run_all there) and `here` runs in this process meanwhile, with one BLAS thread as a
    forked process has (_child); otherwise both run together by run_all. A job's exception is raised here."""
    early = _early
    if early is None or not jobs:
        done = run_all([*jobs, *here])
        return done[: len(jobs)], done[len(jobs) :]
    early.submit(jobs)
    try:
        with threadpoolctl.threadpool_limits(1):
            beside = [job() for job in here]
    except BaseException:
        early.settle()
        raise
    return early.result(), beside


def _child() -> None:
    global _in_child
    _in_child = True
    # One BLAS thread per process: each forked process would otherwise run as many as there are cores,
    # which then wait on each other (the mixed models' fits took 60% longer side by side than in turn).
    threadpoolctl.threadpool_limits(1)


def _run(index: int):
    return _jobs[index]()
