"""The scheduler class of `gpucloud scheduler`: RedBeat's, beating the process's heartbeat
(`gpucloud.liveness`) each time beat's loop comes round, so the liveness probe sees a leader whose loop has
stalled."""

from __future__ import annotations

from typing import Any

from redbeat import RedBeatScheduler

from gpucloud import liveness


class Scheduler(RedBeatScheduler):  # type: ignore[misc]  # celery-redbeat ships no type information
    def tick(self, *args: Any, **kwargs: Any) -> float:
        """RedBeat's tick (extend the leader's lock, send what is due), then the beat: a tick that hangs on
        Redis beats no more."""
        interval: float = super().tick(*args, **kwargs)
        liveness.beat()
        return interval
