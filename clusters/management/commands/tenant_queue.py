"""`manage.py tenant_queue SLUG`: the tenant's pending workloads in queue order, with position, reason and
estimated start (clusters/queue.py; docs/placement.md, "Queue estimates"). Reads only."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clusters import queue
from tenants.models import Tenant


class Command(BaseCommand):
    help = "List a tenant's pending workloads: position, reason in plain words, estimated start."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--json", action="store_true", help="one JSON list instead of lines")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.select_related("cluster__host_cluster").filter(slug=options["slug"]).first()
        if tenant is None:
            raise CommandError(f"no tenant {options['slug']!r}")
        entries = queue.tenant_queue(tenant)
        if options["json"]:
            rows = [
                {
                    **vars(e),
                    "scheduler": e.scheduler,
                    "created_at": e.created_at.isoformat() if e.created_at else None,
                    "estimated_start": e.estimated_start.isoformat() if e.estimated_start else None,
                }
                for e in entries
            ]
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not entries:
            self.stdout.write(f"{tenant.slug}: nothing pending")
            return
        for e in entries:
            when = (
                e.estimated_start.isoformat(timespec="minutes") if e.estimated_start else "not within a week"
            )
            pods = f" in {e.pods} pods" if e.pods > 1 else ""
            priority = f"  priority {e.priority}" if e.priority else ""
            said = f"  [{e.scheduler} says: {e.scheduler_message}]" if e.scheduler_message else ""
            self.stdout.write(
                f"{e.position}. {e.name}  {e.gpus} × {e.gpu_class}{pods}{priority}  "
                f"starts: {when}  — {e.reason}{said}"
            )
