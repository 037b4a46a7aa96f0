"""Who writes the live view of a host cluster: a lease on its `fleet.PodWatch` row, so one watch feeds it.

Two kinds of process can run a host cluster's pod feed with the live view as its sink: the scheduler
extender (`manage.py serve_extender`, whose feed runs anyway) and the Celery pass (`placement.live_pass`).
Whichever holds the lease writes; the other leaves the view alone, so there is one watch per host cluster,
not two. The extender takes the lease at each list and keeps it; a pass takes it only when it is free
(never held, released, or lapsed: its holder died) and gives it back when it ends, so a running extender
gets it at its next list.

Taking is one conditional UPDATE (``WHERE holder = me OR held_until IS NULL OR held_until <= now()``) and
its row count says who won, so two processes racing for it cannot both hold it; the times are the
database's clock (``now()``), never two machines' clocks compared. Renewing is an UPDATE ``WHERE holder =
me`` (it carries the watch position along, see `LiveView.save_position`): a holder whose lease lapsed and
was taken by another finds zero rows and stops writing. Between renewals a holder trusts its lease only
until its own monotonic clock says it may have lapsed (measured from before the UPDATE, so never later than
the database's expiry); a stalled process that wakes renews before it writes again.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db.models import ExpressionWrapper, Q
from django.db.models import fields as model_fields
from django.db.models.functions import Now

from fleet.models import HostCluster, PodWatch

FLOOR_SECONDS = 10.0  # a lease never shorter: a list of a large cluster alone takes seconds


def holder_name(role: str) -> str:
    """This process as a lease holder: ``host:pid:role`` (role: ``extender`` or ``worker``)."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}"[:200]


def lease_seconds(watch_seconds: float) -> float:
    """How long a feed that watches for `watch_seconds` at a time holds the lease: two watches."""
    return max(2.0 * watch_seconds, FLOOR_SECONDS)


def _until(seconds: float) -> ExpressionWrapper[Any]:
    return ExpressionWrapper(Now() + timedelta(seconds=seconds), output_field=model_fields.DateTimeField())


class Lease:
    """One holder's lease on one host cluster's view (see the module docstring)."""

    def __init__(
        self,
        host_cluster: HostCluster,
        holder: str,
        seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.host_cluster = host_cluster
        self.holder = holder
        self.seconds = seconds
        self.monotonic = monotonic
        self._valid_until = 0.0  # monotonic; 0: not held
        self._renewed_at = 0.0

    @property
    def held(self) -> bool:
        """Whether this holder may write now without asking the database again."""
        return self.monotonic() < self._valid_until

    @property
    def due(self) -> bool:
        """A third of the lease has passed since it was last renewed: renew it at the next save."""
        return self.monotonic() - self._renewed_at >= self.seconds / 3

    def take(self) -> bool:
        """Hold the lease if it is free or already ours; False while another live holder has it."""
        PodWatch.objects.get_or_create(host_cluster=self.host_cluster)
        free = Q(holder=self.holder) | Q(held_until__isnull=True) | Q(held_until__lte=Now())
        return self._update(PodWatch.objects.filter(host_cluster=self.host_cluster).filter(free), {})

    def renew(self, **fields: Any) -> bool:
        """Extend the lease if this holder still has it, writing `fields` of the row in the same UPDATE;
        False (and not held from now on) when another process took it over."""
        rows = PodWatch.objects.filter(host_cluster=self.host_cluster, holder=self.holder)
        return self._update(rows, fields)

    def release(self) -> None:
        """Give the lease back at once (a clean stop): the next taker need not wait for it to lapse."""
        PodWatch.objects.filter(host_cluster=self.host_cluster, holder=self.holder).update(held_until=Now())
        self._valid_until = 0.0

    def forget(self) -> None:
        """Stop trusting the lease (a database error left its state unknown): renew or take before writing."""
        self._valid_until = 0.0

    def _update(self, rows: Any, fields: dict[str, Any]) -> bool:
        asked = self.monotonic()
        won: bool = rows.update(holder=self.holder, held_until=_until(self.seconds), **fields) == 1
        self._valid_until = asked + self.seconds if won else 0.0
        if won:
            self._renewed_at = asked
        return won


def holder_of(host_cluster: HostCluster) -> str:
    """Who holds the host cluster's lease now ("" when nobody does)."""
    row = (
        PodWatch.objects.filter(host_cluster=host_cluster, held_until__gt=Now())
        .values_list("holder", flat=True)
        .first()
    )
    return row or ""
