"""One pass of the live view over a Kubernetes host cluster: resume the pod watch, or list.

The watch resumes from the resourceVersion the last pass kept (`fleet.PodWatch`), so a pass costs no list
while the watch can go on; a host cluster never listed, or one whose version the API server has compacted
(410 Gone), is listed again, and that list reconciles what no watch saw. A lock per host cluster keeps two
workers from writing one view at once; a second pass asked meanwhile finds the lock busy and leaves it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from fleet.clients import api_client_of
from fleet.models import HostCluster, PodWatch
from gpucloud.kube.api import Gone, KubeApi, RetryPolicy
from gpucloud.locks import exclusive
from placement.extender.feed import ClusterFeed
from placement.live.view import LiveView

RETRY = RetryPolicy(attempts=2, base_seconds=0.2, cap_seconds=1.0, timeout_seconds=10.0)


@dataclass(frozen=True)
class LiveOutcome:
    """What one pass did: whether it listed (first pass, or after 410 Gone), events applied, rows written."""

    listed: bool
    events: int
    writes: int
    resource_version: str


def live_pass(host_cluster: HostCluster, *, watch_seconds: int, api: KubeApi | None = None) -> LiveOutcome:
    """Watch the host cluster's pods for up to `watch_seconds` from where the last pass stopped (see the
    module docstring)."""
    with exclusive(f"live-view:{host_cluster.pk}"):
        api = api or KubeApi(api_client_of(host_cluster), RETRY)
        view = LiveView(host_cluster)
        feed = ClusterFeed(api, watch_seconds=watch_seconds, sinks=[view])
        known = PodWatch.objects.filter(host_cluster=host_cluster).values_list("resource_version", flat=True)
        version, listed = next(iter(known), ""), False
        if not version:
            version, listed = feed.list_pass(None), True
        try:
            feed.watch(None, version, threading.Event())
        except Gone:
            feed.list_pass(None)
            listed = True
        finally:
            events = view.events
            view.save_position()
        return LiveOutcome(listed, events, view.writes, view.resource_version)
