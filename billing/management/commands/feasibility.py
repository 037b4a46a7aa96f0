"""`manage.py feasibility SLUG --class X --count N --hours T`: could it start now, if not when, where, which
quota, at what price (placement/queue_estimate.py, billing/services/quote.py). The ask goes behind the
tenant's waiting workloads in queue order, as the API's and the portal's do (`fleet.PendingWorkload`).
Creates nothing."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.services import quote
from fleet.models import PendingWorkload
from gpucloud.errors import ServiceError
from placement import queue_estimate
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Ask whether N units of a GPU class could start for a tenant, when, where and at what price."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--class", dest="gpu_class", required=True, help="a GPU class name")
        parser.add_argument("--count", type=int, required=True, help="units of the class")
        parser.add_argument("--hours", type=float, required=True, help="how long it would run")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.select_related("cluster__host_cluster").filter(slug=options["slug"]).first()
        if tenant is None:
            raise CommandError(f"no tenant {options['slug']!r}")
        try:
            answer = queue_estimate.feasibility(
                tenant,
                options["gpu_class"],
                options["count"],
                options["hours"],
                ahead=PendingWorkload.objects.filter(tenant=tenant).ahead(),
            )
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc
        use = answer.quota
        body = {
            "fits_now": answer.fits_now,
            "estimated_start": answer.estimated_start.isoformat() if answer.estimated_start else None,
            "reason": answer.reason,
            "host_cluster": answer.host_cluster,
            "nodes": answer.nodes,
            "quota": vars(use) if use else None,
            "price": quote.quote(tenant, answer.gpu_class, answer.count, answer.hours),
        }
        self.stdout.write(json.dumps(body, indent=2))
