from __future__ import annotations

import signal
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.models import HostCluster
from fleet.selectors import SERVING
from gitops.controller import KINDS, Controller
from gpucloud import liveness
from gpucloud.kube.errors import DriverError


class Command(BaseCommand):
    help = (
        "Apply the Tenant and RateCard custom resources of every host cluster registered with "
        "--watch-tenants (list, then watch), and write their status; runs until stopped (SIGTERM)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host-cluster", action="append", default=[], metavar="NAME", help="only these")
        parser.add_argument("--once", action="store_true", help="one list-and-apply pass, then exit")
        parser.add_argument(
            "--resync",
            type=float,
            default=settings.TENANT_RESOURCES_RESYNC,
            metavar="SECONDS",
            help="a full pass this often (GPUCLOUD_TENANT_RESOURCES_RESYNC, default 60)",
        )

    def _clusters(self, names: list[str]) -> list[HostCluster]:
        clusters = HostCluster.objects.filter(SERVING).exclude(tenants_namespace="")  # retired: none
        if names:
            clusters = clusters.filter(name__in=names)
            missing = set(names) - {c.name for c in clusters}
            if missing:
                raise CommandError(f"no host cluster watches tenants called: {', '.join(sorted(missing))}")
        return list(clusters)

    def _start(
        self,
        cluster: HostCluster,
        running: dict[tuple[int, str], threading.Thread],
        stop: threading.Event,
        resync: float,
    ) -> None:
        """Start a thread per kind of `cluster` that has none running."""
        idle = [k for k in KINDS if not (t := running.get((cluster.pk, k.kind))) or not t.is_alive()]
        if not idle:
            return
        controller = Controller(cluster, resync_seconds=resync)  # decrypts the kubeconfig: only when needed
        for kind in idle:
            thread = threading.Thread(
                target=controller.run,
                args=(kind, stop),
                name=f"{cluster.name}-{kind.plural}",
                daemon=True,  # one waiting in a watch is not waited for at exit (below)
            )
            running[(cluster.pk, kind.kind)] = thread
            thread.start()
            self.stdout.write(f"watching {kind.plural} in {cluster.name}/{cluster.tenants_namespace}")

    def _once(self, cluster: HostCluster) -> bool:
        try:
            controller = Controller(cluster)
            for kind in KINDS:
                controller.sync(kind)
        except DriverError as exc:
            self.stderr.write(f"{cluster.name}: {exc}")
            return False
        self.stdout.write(f"{cluster.name}: namespace {cluster.tenants_namespace} applied")
        return True

    def handle(self, *args: Any, host_cluster: list[str], once: bool, resync: float, **options: Any) -> None:
        if once:
            failed = [c.name for c in self._clusters(host_cluster) if not self._once(c)]
            if failed:
                raise CommandError(f"could not read the custom resources of: {', '.join(failed)}")
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        running: dict[tuple[int, str], threading.Thread] = {}
        while not stop.is_set():
            liveness.beat()  # `gpucloud tenant-watcher`'s /healthz: this loop still comes round
            # Host clusters registered (or threads ended) since the last look are picked up here.
            for cluster in self._clusters(host_cluster):
                self._start(cluster, running, stop, resync)
            stop.wait(resync)
        # A thread applying finishes its transaction; one waiting in a watch (up to 5 minutes) is left to
        # end with the process: it holds nothing.
        deadline = time.monotonic() + 10
        for thread in running.values():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
