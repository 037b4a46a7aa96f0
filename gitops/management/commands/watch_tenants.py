from __future__ import annotations

import signal
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from gitops.controller import KINDS, Controller
from scheduling.models import HostCluster


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
        clusters = HostCluster.objects.exclude(tenants_namespace="")
        if names:
            clusters = clusters.filter(name__in=names)
            missing = set(names) - {c.name for c in clusters}
            if missing:
                raise CommandError(f"no host cluster watches tenants called: {', '.join(sorted(missing))}")
        return list(clusters)

    def handle(self, *args: Any, host_cluster: list[str], once: bool, resync: float, **options: Any) -> None:
        if once:
            for cluster in self._clusters(host_cluster):
                controller = Controller(cluster)
                for kind in KINDS:
                    controller.sync(kind)
                self.stdout.write(f"{cluster.name}: namespace {cluster.tenants_namespace} applied")
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        running: dict[tuple[int, str], threading.Thread] = {}
        while not stop.is_set():
            # Host clusters registered (or their threads ended) since the last look are picked up here.
            for cluster in self._clusters(host_cluster):
                controller = Controller(cluster, resync_seconds=resync)
                for kind in KINDS:
                    key = (cluster.pk, kind.kind)
                    if key not in running or not running[key].is_alive():
                        running[key] = threading.Thread(
                            target=controller.run,
                            args=(kind, stop),
                            name=f"{cluster.name}-{kind.plural}",
                            daemon=True,  # one waiting in a watch is not waited for at exit (below)
                        )
                        running[key].start()
                        self.stdout.write(
                            f"watching {kind.plural} in {cluster.name}/{cluster.tenants_namespace}"
                        )
            stop.wait(resync)
        # A thread applying finishes its transaction; one waiting in a watch (up to 5 minutes) is left to
        # end with the process: it holds nothing.
        deadline = time.monotonic() + 10
        for thread in running.values():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
