from __future__ import annotations

from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from gitops.specs import export
from tenants.models import Tenant


class Command(BaseCommand):
    help = "Write the current host clusters, rate cards and tenants as manifests that `apply` accepts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", metavar="SLUG", help="only this tenant")

    def handle(self, *args: Any, tenant: str | None, **options: Any) -> None:
        if tenant is not None and not Tenant.objects.filter(slug=tenant).exists():
            raise CommandError(f"there is no tenant {tenant!r}")
        self.stdout.write(yaml.safe_dump_all(export(tenant), sort_keys=False), ending="")
