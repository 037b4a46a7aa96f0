"""The extender process's Django side: which host clusters it serves, and who may ask it.

Authentication, decided for kube-scheduler's reach: its extender client can present a TLS client
certificate (``tlsConfig.certFile``/``keyFile``) but no header, so the process can require mutual TLS
(``serve_extender --tls-client-ca``: only certificates that CA issued get a connection). Everything else
(tools, a proxy in front, the benchmark) sends ``Authorization: Bearer gpc_…``, a live API token of an
active platform administrator. Token checks are cached for ``AUTH_CACHE_SECONDS`` so that a call costs no
database query: a revoked token keeps working that long in a running extender.

Each Kubernetes host cluster gets an :class:`Extender` over its GPU nodes (listed once at start), fed by a
:class:`ClusterFeed` thread (list, watch, repeat). A host cluster asked for before its first list finished
answers 503 (kube-scheduler goes on without the extender).

The same feed writes the host cluster's live view (`placement.live.view.LiveView`, a sink of the feed): the
view takes the lease at each list (`placement.live.lease`), so the Celery pass leaves the cluster to this
process and there is one watch, not two. The feed thread lives as long as the process, so it keeps one
database connection: checked (``close_old_connections``) before each list, closed after a database error
(the view stands down until its next list, the extender carries on: it needs no database) and when the
thread ends, when the lease is given back for the Celery pass to take over at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError, close_old_connections, connection

from core.permissions import is_platform_admin
from fleet.clients import api_client_of
from fleet.models import HostCluster
from gpucloud.kube.api import KubeApi, RetryPolicy
from gpucloud.kube.errors import DriverError
from placement.extender.feed import ClusterFeed
from placement.extender.http import NotReady
from placement.extender.state import Extender
from placement.live.claims import ClaimStore
from placement.live.lease import Lease, holder_name, lease_seconds
from placement.live.view import LiveView
from tenants import tokens

log = logging.getLogger(__name__)
AUTH_CACHE_SECONDS = 60.0
FEED_RETRY = RetryPolicy(attempts=2, base_seconds=0.2, cap_seconds=1.0, timeout_seconds=10.0)


@dataclass
class _Cluster:
    extender: Extender | None = None
    error: str = "listing the host cluster's nodes and pods"
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    view: ViewSink | None = None


class ViewSink:
    """The live view as a sink of the extender's feed: made at the first list, it writes while it holds the
    lease; a failure (the database's, or a pod the view cannot write) is logged and makes it stand down until
    the next list, and never reaches the feed: the extender needs no view to answer (see the module
    docstring)."""

    def __init__(self, host: HostCluster, claims: ClaimStore, watch_seconds: int) -> None:
        self.host = host
        self.claims = claims
        self.lease = Lease(host, holder_name("extender"), lease_seconds(watch_seconds))
        self.view: LiveView | None = None

    def listed(
        self, items: list[dict[str, Any]], resource_version: str, asked_at: datetime | None = None
    ) -> None:
        close_old_connections()
        try:
            if self.view is None:
                self.view = LiveView(self.host, lease=self.lease, claims=self.claims)
            self.view.listed(items, resource_version, asked_at)
        except Exception as e:  # logged; the extender carries on
            self._stand_down(e)

    def changed(self, kind: str, item: dict[str, Any]) -> None:
        if self.view is None or not self.view.active:
            return
        try:
            self.view.changed(kind, item)
        except Exception as e:  # logged; the extender carries on
            self._stand_down(e)

    def close(self) -> None:
        """The feed stops: save the position, give the lease back, let the connection go."""
        try:
            if self.view is not None and self.view.active:
                self.view.release()
        except DatabaseError as e:
            log.warning("live view: cannot give the lease back", extra={"error": str(e)})
        finally:
            connection.close()

    def _stand_down(self, error: Exception) -> None:
        log.warning(
            "live view stands down until the next list",
            extra={"host_cluster": self.host.name, "error": str(error)},
            exc_info=not isinstance(error, DatabaseError),
        )
        if self.view is not None:
            self.view.active = False
        self.lease.forget()
        connection.close()


class Registry:
    """Host-cluster extenders of this process, built on first use, and the token check."""

    def __init__(self, policy: str = "default", watch_seconds: int = 60) -> None:
        self.policy = policy
        self.watch_seconds = watch_seconds
        self.clusters: dict[str, _Cluster] = {}
        self._tokens: dict[str, float] = {}  # token -> valid until (monotonic)
        self._lock = threading.Lock()

    def authorize(self, token: str) -> bool:
        """Whether the token is a live token of an active platform administrator (cached)."""
        now = time.monotonic()
        if self._tokens.get(token, 0) > now:
            return True
        try:
            row, _ = tokens.check(token)
            ok = row is not None and row.user.is_active and is_platform_admin(row.user)
        finally:
            connection.close()  # server threads come and go: hold no connection
        if ok:
            self._tokens[token] = now + AUTH_CACHE_SECONDS
        return ok

    def resolve(self, name: str) -> Extender | None:
        """The extender of a Kubernetes host cluster; None if there is none; NotReady while it is listed."""
        with self._lock:
            cluster = self.clusters.get(name)
            if cluster is None:
                try:
                    host = HostCluster.objects.filter(name=name, driver=HostCluster.Driver.KUBERNETES).first()
                finally:
                    connection.close()  # server threads come and go: hold no connection
                if host is None:
                    return None
                cluster = self.clusters[name] = _Cluster()
                cluster.thread = threading.Thread(
                    target=self._serve, args=(host, cluster), daemon=True, name=f"feed-{name}"
                )
                cluster.thread.start()
        if cluster.extender is None:
            raise NotReady(f"host cluster {name!r}: {cluster.error}")
        return cluster.extender

    def start(self, names: list[str]) -> None:
        """Begin listing these host clusters now rather than on their first call."""
        for name in names:
            with contextlib.suppress(NotReady):  # it is being listed: exactly what was asked
                self.resolve(name)

    def stop(self, wait: float = 0.0) -> None:
        """Stop every feed (each gives its view's lease back as it ends), waiting up to `wait` s for each."""
        for cluster in self.clusters.values():
            cluster.stop.set()
        for cluster in self.clusters.values():
            if wait and cluster.thread is not None:
                cluster.thread.join(wait)

    def _serve(self, host: HostCluster, cluster: _Cluster) -> None:
        """Build the extender (nodes, first pass), then keep it fed until stopped."""
        feed = ClusterFeed(KubeApi(api_client_of(host), FEED_RETRY), watch_seconds=self.watch_seconds)
        cluster.view = ViewSink(host, feed.claims, self.watch_seconds)
        feed.sinks.append(cluster.view)
        try:
            self._feed(host, cluster, feed)
        finally:
            cluster.view.close()

    def _feed(self, host: HostCluster, cluster: _Cluster, feed: ClusterFeed) -> None:
        while not cluster.stop.is_set():
            try:
                nodes = feed.nodes()
                if not nodes:
                    raise DriverError("the host cluster has no GPU nodes (labelled nvidia.com/gpu.product)")
                extender = Extender(nodes, self.policy)
                feed.list_pass(extender)
                cluster.extender = extender
                break
            except DriverError as e:
                cluster.error = f"cannot list it: {e}"
                log.warning(
                    "extender cannot list host cluster", extra={"host_cluster": host.name, "error": str(e)}
                )
                cluster.stop.wait(5)
        if cluster.extender is not None:
            feed.run(cluster.extender, cluster.stop)
