from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from simulator import workloads as simulator


class Command(BaseCommand):
    help = (
        "Replay H hours of simulated workload on every simulated host cluster, as fast as it runs: pods "
        "arrive, "
        "are placed by the engine and recorded as Pod rows, and depart. Continues from where the "
        "simulation stands (never repeats a minute); the first time it starts at --start, or H hours ago."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--hours", type=float, required=True, help="simulated hours to replay")
        parser.add_argument("--seed", type=int, default=42, help="seed of the arrivals (default 42)")
        parser.add_argument(
            "--start", type=_instant, help="ISO 8601 instant to start at, e.g. 2026-01-05T00:00Z"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["hours"] <= 0:
            raise CommandError("--hours must be positive")
        span = timedelta(hours=options["hours"])
        clusters = simulator.simulated_host_clusters()
        if not clusters:
            raise CommandError(
                "no simulated host cluster with nodes; load one with: manage.py load_fleet FILE"
            )
        for host_cluster in clusters:
            clock = simulator.clock_of(host_cluster)
            start = options["start"] or clock or timezone.now() - span
            begin = max(start, clock) if clock else start
            summary = simulator.advance(host_cluster, start=begin, until=begin + span, seed=options["seed"])
            self.stdout.write(
                f"{host_cluster.name}: {summary.steps} minutes from {begin.isoformat()}, "
                f"{summary.arrived} pods arrived, {summary.placed} placed, {summary.finished} finished, "
                f"{summary.pending} pending"
            )


def _instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"--start {text!r} is not an ISO 8601 instant (e.g. 2026-01-05T00:00:00Z)"
        ) from None
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)
