"""`manage.py host_cluster update|cordon|uncordon|drain|retire|unretire|delete NAME`: a registered host
cluster's life (clusters/lifecycle.py), from the server's console, audited as `console:host_cluster`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clusters import lifecycle
from core.audit import Actor
from fleet.models import HostCluster, host_cluster_named
from gpucloud.errors import ServiceError

ACTOR = Actor.console("host_cluster")


class Command(BaseCommand):
    help = (
        "Update, cordon, uncordon, drain, retire, un-retire or delete a registered host cluster "
        "(docs/kubernetes.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        update = actions.add_parser("update", help="rotate the kubeconfig, change scheduler or namespace")
        update.add_argument("name")
        update.add_argument("--kubeconfig", type=Path, help="a new kubeconfig file (checked first)")
        update.add_argument("--scheduler", choices=HostCluster.Scheduler.values)
        update.add_argument("--watch-tenants", metavar="NAMESPACE", help="empty string: watch none")
        update.add_argument("--region")
        update.add_argument("--endpoint-base")
        cordon = actions.add_parser("cordon", help="place no new tenant there")
        cordon.add_argument("name")
        cordon.add_argument("--reason", default="")
        actions.add_parser("uncordon", help="take new tenants again").add_argument("name")
        drain = actions.add_parser("drain", help="cordon, then move its tenants elsewhere")
        drain.add_argument("name")
        drain.add_argument("--target", default="", help="the host cluster to move to (default: any)")
        drain.add_argument(
            "--recreate", action="store_true", help="also move ready or suspended tenants (re-made empty)"
        )
        drain.add_argument("--dry-run", action="store_true", help="report only")
        retire = actions.add_parser("retire", help="take it out of service for good, keeping its history")
        retire.add_argument("name")
        retire.add_argument("--reason", default="")
        actions.add_parser("unretire", help="put a retired one back in service (cordoned)").add_argument(
            "name"
        )
        actions.add_parser("delete", help="delete it when it is empty").add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            host_cluster = host_cluster_named(options["name"], "name")
            assert host_cluster is not None  # a name is required by the parser
            getattr(self, f"_{options['action']}")(host_cluster, options)
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc

    def _update(self, host_cluster: HostCluster, options: dict[str, Any]) -> None:
        kubeconfig = None
        if options["kubeconfig"] is not None:
            try:
                kubeconfig = options["kubeconfig"].read_text()
            except OSError as exc:
                raise CommandError(f"{options['kubeconfig']}: {exc.strerror}") from exc
        host_cluster = lifecycle.update_host_cluster(
            actor=ACTOR,
            host_cluster=host_cluster,
            kubeconfig=kubeconfig,
            scheduler=options["scheduler"],
            watch_tenants=options["watch_tenants"],
            region=options["region"],
            endpoint_base=options["endpoint_base"],
        )
        self.stdout.write(f"host cluster {host_cluster.name} updated")

    def _cordon(self, host_cluster: HostCluster, options: dict[str, Any]) -> None:
        lifecycle.cordon_host_cluster(actor=ACTOR, host_cluster=host_cluster, reason=options["reason"])
        self.stdout.write(f"host cluster {host_cluster.name} is cordoned: it takes no new tenants")

    def _uncordon(self, host_cluster: HostCluster, options: dict[str, Any]) -> None:
        lifecycle.uncordon_host_cluster(actor=ACTOR, host_cluster=host_cluster)
        self.stdout.write(f"host cluster {host_cluster.name} takes new tenants again")

    def _drain(self, host_cluster: HostCluster, options: dict[str, Any]) -> None:
        report = lifecycle.drain_host_cluster(
            actor=ACTOR,
            host_cluster=host_cluster,
            target=host_cluster_named(options["target"], "target"),
            recreate=options["recreate"],
            dry_run=options["dry_run"],
        )
        verb = "would move" if report.dry_run else "moved"
        for slug, target in sorted(report.moved.items()):
            self.stdout.write(f"{verb} {slug} to {target}")
        for slug, why in sorted(report.refused.items()):
            self.stdout.write(f"kept {slug}: {why}")
        left = "empty" if report.empty else f"{len(report.refused)} tenants left"
        self.stdout.write(
            f"host cluster {host_cluster.name}: {left}" + (" (dry run)" if report.dry_run else "")
        )

    def _retire(self, host_cluster: HostCluster, options: dict[str, Any]) -> None:
        lifecycle.retire_host_cluster(actor=ACTOR, host_cluster=host_cluster, reason=options["reason"])
        self.stdout.write(f"host cluster {host_cluster.name} is retired: out of service, its history kept")

    def _unretire(self, host_cluster: HostCluster, options: dict[str, Any]) -> None:
        lifecycle.unretire_host_cluster(actor=ACTOR, host_cluster=host_cluster)
        self.stdout.write(
            f"host cluster {host_cluster.name} is back in service, still cordoned: uncordon it to take "
            "tenants"
        )

    def _delete(self, host_cluster: HostCluster, options: dict[str, Any]) -> None:
        lifecycle.delete_host_cluster(actor=ACTOR, host_cluster=host_cluster)
        self.stdout.write(f"host cluster {host_cluster.name} deleted")
