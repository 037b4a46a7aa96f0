"""One pass of the live view over a Kubernetes host cluster: resume the pod watch, or list.

The watch resumes from the resourceVersion the view's writer last kept (`fleet.PodWatch`), so a pass costs
no list while the watch can go on; a host cluster never listed, or one whose version the API server has
compacted (410 Gone), is listed again, and that list reconciles what no watch saw. A lock per host cluster
keeps two workers from writing one view at once; a second pass asked meanwhile finds the lock busy and
leaves it.

One watch per host cluster: a pass runs only when it takes the view's lease (`placement.live.lease`). The
scheduler extender, when it serves the host cluster, holds it and its feed writes the view; the pass then
ends at once, opening no watch and listing nothing. When the extender stops (its lease released) or dies
(its lease lapsed, two of its watch timeouts after its last renewal), the next pass takes over from the
position the extender saved, and gives the lease back when it ends, so a running extender gets it again at
its next list.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from fleet.clients import api_client_of
from fleet.models import HostCluster, PodWatch
from gpucloud.kube.api import Gone, KubeApi, RetryPolicy
from gpucloud.locks import exclusive
from placement.extender.feed import ClusterFeed
from placement.live.lease import Lease, holder_name, holder_of, lease_seconds
from placement.live.view import LiveView

RETRY = RetryPolicy(attempts=2, base_seconds=0.2, cap_seconds=1.0, timeout_seconds=10.0)


@dataclass(frozen=True)
class LiveOutcome:
    """What one pass did: whether it listed (first pass, or after 410 Gone), events applied, rows written;
    `held_by` names the process whose feed writes the view when this pass left it alone ("" otherwise)."""

    listed: bool
    events: int
    writes: int
    resource_version: str
    held_by: str = ""


def live_pass(host_cluster: HostCluster, *, watch_seconds: int, api: KubeApi | None = None) -> LiveOutcome:
    """Watch the host cluster's pods for up to `watch_seconds` from where the last writer stopped, unless
    another process holds the view's lease (see the module docstring)."""
    with exclusive(f"live-view:{host_cluster.pk}"):
        lease = Lease(host_cluster, holder_name("worker"), lease_seconds(watch_seconds))
        if not lease.take():
            return LiveOutcome(False, 0, 0, "", held_by=holder_of(host_cluster) or "another process")
        try:
            api = api or KubeApi(api_client_of(host_cluster), RETRY)
            feed = ClusterFeed(api, watch_seconds=watch_seconds)
            view = LiveView(host_cluster, lease=lease, claims=feed.claims)
            feed.sinks.append(view)
            known = PodWatch.objects.filter(host_cluster=host_cluster).values_list(
                "resource_version", flat=True
            )
            version, listed = next(iter(known), ""), False
            if not version:
                version, listed = feed.list_pass(None), True
            else:  # resuming: the claims as they are now (a list pass lists them itself)
                feed.claims.refresh()
            try:
                feed.watch(None, version, threading.Event())
            except Gone:
                feed.list_pass(None)
                listed = True
            finally:
                view.release()
        except BaseException:
            lease.release()
            raise
        return LiveOutcome(listed, view.seen, view.writes, view.resource_version)
