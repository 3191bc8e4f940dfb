"""The last part of a run's teardown, off the run's critical path.

A run is final once every process of it has been sent SIGKILL and is gone (core.py does
that before it reports the outcome): nothing of the tool can write any more. What is left
(closing its pipes, stopping slirp4netns, removing the cgroup directories, unmounting the
disk quota, removing the run dir) frees resources but decides nothing, so it runs here, on
one daemon thread, in the order it was submitted, while the worker takes its next run.

`drain()` waits for everything submitted; it runs at exit (and at a Celery worker
process's shutdown, tools_app/celery hooks), and tests call it before they look for
leftovers. A backlog is bounded: past MAX_PENDING, submit() waits for the queue first.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

logger = logging.getLogger(__name__)

MAX_PENDING = 8  # teardowns waiting; more and the run that submits waits for them
DRAIN_SECONDS = 60.0


class _Queue:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.jobs: deque[Callable[[], None]] = deque()
        self.busy = False  # a job is running
        self.thread: threading.Thread | None = None

    def pending(self) -> int:
        with self.cond:
            return len(self.jobs) + self.busy

    def submit(self, job: Callable[[], None]) -> None:
        with self.cond:
            if len(self.jobs) + self.busy >= MAX_PENDING:
                self._wait_empty(DRAIN_SECONDS)
            self.jobs.append(job)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="run-teardown", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def drain(self, timeout: float = DRAIN_SECONDS) -> bool:
        """Wait until every submitted job has run; False if that took over `timeout`."""
        if threading.current_thread() is self.thread:
            return not self.jobs  # a job cannot wait for itself
        with self.cond:
            return self._wait_empty(timeout)

    def _wait_empty(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.jobs or self.busy:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.cond.wait(remaining)
        return True

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.jobs:
                    self.cond.wait()
                job = self.jobs.popleft()
                self.busy = True
            try:
                job()
            except Exception:
                logger.exception("a run's teardown failed")
            finally:
                with self.cond:
                    self.busy = False
                    self.cond.notify_all()

    def after_fork_in_child(self) -> None:
        """A forked child owns none of its parent's runs (and has no teardown thread)."""
        self.__init__()


_queue = _Queue()
os.register_at_fork(after_in_child=_queue.after_fork_in_child)


def submit(job: Callable[[], None]) -> None:
    """Run `job` on the teardown thread, after everything submitted before it."""
    _queue.submit(job)


def drain(timeout: float = DRAIN_SECONDS) -> bool:
    """Wait for every pending teardown; False if they took longer than `timeout`."""
    return _queue.drain(timeout)


def pending() -> int:
    return _queue.pending()


atexit.register(drain)
