"""`manage.py meter ingest FILE --node NAME --at ISO8601`: ingest a saved exposition as if scraped then.

`manage.py meter collect` runs one collection round of every host cluster now.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing import collect
from billing.models import HeldRound
from billing.services.ingest import ingest_scrape
from fleet.models import HostCluster, Node


class Command(BaseCommand):
    help = "Metering: ingest a saved dcgm-exporter exposition (replay, backfill), or collect one round now."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        ingest = sub.add_parser("ingest", help="ingest one saved exposition as if scraped at --at")
        ingest.add_argument(
            "file", help="a /metrics body saved from dcgm-exporter ('-' reads standard input)"
        )
        ingest.add_argument("--node", required=True, help="the node the exposition came from")
        ingest.add_argument("--at", required=True, help="when it was scraped, ISO 8601 with a time zone")
        ingest.add_argument("--host-cluster", default="", help="needed when the node is not in the fleet")
        sub.add_parser("collect", help="one collection round of every host cluster, now")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "collect":
            for cluster, records in collect.collect_all().items():
                bad = sum(1 for r in records.values() if r.status != "ok")
                held = HeldRound.objects.filter(host_cluster__name=cluster).count()
                waiting = f", {held} held for the live view" if held else ""
                self.stdout.write(f"{cluster}: {len(records)} nodes, {bad} not fully collected{waiting}")
            return
        self._ingest(options["file"], options["node"], options["at"], options["host_cluster"])

    def _ingest(self, file: str, node: str, at_text: str, cluster_name: str) -> None:
        try:
            at = datetime.fromisoformat(at_text)
        except ValueError:
            raise CommandError(f"--at {at_text!r} is not an ISO 8601 time (2026-05-01T12:00:30Z)") from None
        if at.tzinfo is None:
            raise CommandError(f"--at {at_text!r} has no time zone; add Z or +00:00")
        host_cluster = self._host_cluster(node, cluster_name)
        try:
            text = Path(file).read_bytes() if file != "-" else self.stdin_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        record = ingest_scrape(host_cluster, node, at, text)
        self.stdout.write(
            f"{record.node} at {record.at.isoformat()}: {record.status}, {record.devices} devices, "
            f"{record.garbled} garbled, {record.late} late, {record.duplicates} duplicate, {record.gaps} gaps"
            + (f" ({record.reason})" if record.reason else "")
        )

    def stdin_bytes(self) -> bytes:
        return sys.stdin.buffer.read()

    def _host_cluster(self, node: str, cluster_name: str) -> HostCluster:
        if cluster_name:
            found = HostCluster.objects.filter(name=cluster_name).first()
            if found is None:
                raise CommandError(f"there is no host cluster called {cluster_name!r}")
            return found
        known = Node.objects.filter(name=node).select_related("host_cluster").first()
        if known is not None:
            return known.host_cluster
        clusters = list(HostCluster.objects.all()[:2])
        if len(clusters) == 1:
            return clusters[0]
        raise CommandError(f"node {node!r} is not in the fleet; name its host cluster with --host-cluster")
