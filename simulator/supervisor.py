"""Keep a few processes running: restart one that dies (with backoff); stop all on SIGTERM, SIGINT, SIGHUP.

The embedded default's `serve_embedded` runs web, worker and beat with it. Each child leads its own process
group, so stopping a child stops whatever it started too, and a Ctrl-C in the terminal reaches the supervisor
only, which then stops the children in order instead of all of them racing at once. On Linux each child also
asks the kernel for SIGTERM if the supervisor itself dies (even of SIGKILL), so no child outlives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

log = logging.getLogger(__name__)

FIRST_DELAY = 1.0
MAX_DELAY = 30.0
# A child that ran this long before dying is restarted at once: it was healthy, not crash-looping.
HEALTHY_AFTER = 60.0
STOP_TIMEOUT = 10.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: the kernel sends it SIGTERM when the supervisor dies."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Child:
    """One supervised command, its current process and its restart history."""

    name: str
    argv: Sequence[str]
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restarts: int = 0
    crashes_in_a_row: int = 0
    restart_at: float | None = None

    def backoff(self) -> float:
        return min(FIRST_DELAY * 2.0 ** (self.crashes_in_a_row - 1), MAX_DELAY)


class Supervisor:
    """Start the children, restart any that exits, and stop them all when asked."""

    def __init__(self, commands: Mapping[str, Sequence[str]], env: Mapping[str, str]) -> None:
        self.children = [Child(name, argv) for name, argv in commands.items()]
        self.env = dict(env)
        self.stopping: signal.Signals | None = None

    def run(self, on_started: Callable[[], None] = lambda: None) -> None:
        previous = {sig: signal.signal(sig, self._ask_to_stop) for sig in STOP_SIGNALS}
        try:
            for child in self.children:
                self._start(child)
            on_started()
            while self.stopping is None:
                self._tend(time.monotonic())
                time.sleep(0.2)
            log.info("stopping on %s", self.stopping.name)
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _ask_to_stop(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping = signal.Signals(signum)

    def _start(self, child: Child) -> None:
        child.process = subprocess.Popen(
            child.argv, env=self.env, process_group=0, preexec_fn=_die_with_parent
        )
        child.started_at = time.monotonic()
        child.restart_at = None
        log.info("started %s", child.name, extra={"child": child.name, "pid": child.process.pid})

    def _tend(self, now: float) -> None:
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restarts += 1
                    self._start(child)
            elif child.process is not None and child.process.poll() is not None:
                self._schedule_restart(child, now)

    def _schedule_restart(self, child: Child, now: float) -> None:
        assert child.process is not None
        _kill_group(child.process.pid, signal.SIGKILL)  # whatever the dead child started goes with it
        ran_for = now - child.started_at
        child.crashes_in_a_row = 1 if ran_for >= HEALTHY_AFTER else child.crashes_in_a_row + 1
        delay = 0.0 if ran_for >= HEALTHY_AFTER else child.backoff()
        child.restart_at = now + delay
        log.error(
            "%s exited with %s after %.1f s; restart %d in %.1f s",
            child.name,
            child.process.returncode,
            ran_for,
            child.restarts + 1,
            delay,
            extra={"child": child.name, "exit_code": child.process.returncode, "restart_in": delay},
        )

    def stop(self) -> None:
        """SIGTERM to every child's process group, SIGKILL to what is left after STOP_TIMEOUT."""
        running = [c.process for c in self.children if c.process is not None and c.process.poll() is None]
        for process in running:
            _kill_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for process in running:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log.warning("pid %s did not stop within %s s; killing it", process.pid, STOP_TIMEOUT)
        for child in self.children:
            if child.process is not None:
                _kill_group(child.process.pid, signal.SIGKILL)  # stragglers, and grandchildren
                child.process.wait()


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is already empty
        os.killpg(pgid, sig)
