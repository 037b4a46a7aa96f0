from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.audit import Actor
from fleet import fleet_file
from fleet.services import load_fleet


class Command(BaseCommand):
    help = "Load (or reload) a simulated host cluster from a fleet YAML file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", nargs="?", default=settings.GPUCLOUD_FLEET, help="fleet file")

    def handle(self, *args: Any, path: str, **options: Any) -> None:
        try:
            fleet = fleet_file.load(path)
            result = load_fleet(actor=Actor.system("load_fleet"), fleet=fleet, source=path)
        except (fleet_file.FleetFileError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"host cluster {result.host_cluster.name}: {result.nodes} nodes, {result.gpus} GPUs"
            + (f", {result.removed_nodes} nodes removed" if result.removed_nodes else "")
        )
