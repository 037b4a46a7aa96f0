from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clusters.registration import register_host_cluster
from core.audit import Actor
from gpucloud.errors import ServiceError


class Command(BaseCommand):
    help = "Register a Kubernetes host cluster from a kubeconfig file (checked and discovered first)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--kubeconfig", required=True, type=Path)
        parser.add_argument("--scheduler", required=True, choices=["kueue", "kai"])
        parser.add_argument("--region", default="")
        parser.add_argument("--endpoint-base", default="", help="e.g. https://vc.example.com")
        parser.add_argument("--vcluster-mode", default="helmrelease", choices=["helmrelease", "platform"])
        parser.add_argument(
            "--topology-level", action="append", default=[], help="node label, outermost first"
        )
        parser.add_argument(
            "--watch-tenants",
            metavar="NAMESPACE",
            default="",
            help="apply the Tenant and RateCard custom resources declared in this namespace",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            kubeconfig = options["kubeconfig"].read_text()
        except OSError as exc:
            raise CommandError(f"{options['kubeconfig']}: {exc.strerror}") from exc
        try:
            host_cluster = register_host_cluster(
                actor=Actor.console("add_host_cluster"),
                name=options["name"],
                kubeconfig=kubeconfig,
                scheduler=options["scheduler"],
                region=options["region"],
                endpoint_base=options["endpoint_base"],
                vcluster_mode=options["vcluster_mode"],
                topology_levels=tuple(options["topology_level"]),
                watch_tenants=options["watch_tenants"],
            )
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(
            f"host cluster {host_cluster.name}: Kubernetes {host_cluster.server_version}, "
            f"scheduler {host_cluster.scheduler}, {host_cluster.nodes.count()} GPU nodes"
            + (
                f"; Tenant and RateCard resources in namespace {host_cluster.tenants_namespace} are "
                "applied by `manage.py watch_tenants`"
                if host_cluster.tenants_namespace
                else ""
            )
        )
