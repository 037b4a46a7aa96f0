"""`manage.py serve_extender`: kube-scheduler's extender for Kubernetes host clusters (docs/placement.md)."""

from __future__ import annotations

import ssl
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from fleet.models import HostCluster
from placement.engine.policies import POLICIES
from placement.extender.http import ExtenderServer, HealthServer
from placement.extender.service import Registry


class Command(BaseCommand):
    help = "Serve /scheduler/v1/<host-cluster>/{filter,prioritize} for kube-scheduler (one process)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--bind", default="0.0.0.0:8443", help="host:port (default 0.0.0.0:8443)")
        parser.add_argument(
            "--health-bind",
            default="",
            help="host:port serving GET /healthz in plain HTTP for probes that hold no client certificate",
        )
        parser.add_argument("--policy", default="default", choices=sorted(POLICIES))
        parser.add_argument("--watch-seconds", type=int, default=60, help="a list pass at least this often")
        parser.add_argument("--tls-cert", default="", help="PEM certificate (with --tls-key) to serve HTTPS")
        parser.add_argument("--tls-key", default="")
        parser.add_argument(
            "--tls-client-ca",
            default="",
            help="require client certificates issued by this CA (kube-scheduler's)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        address = _address("--bind", options["bind"])
        health_address = _address("--health-bind", options["health_bind"]) if options["health_bind"] else None
        if bool(options["tls_cert"]) != bool(options["tls_key"]):
            raise CommandError("--tls-cert and --tls-key go together")
        if options["tls_client_ca"] and not options["tls_cert"]:
            raise CommandError("--tls-client-ca needs --tls-cert and --tls-key")
        registry = Registry(options["policy"], options["watch_seconds"])
        server = ExtenderServer(address, registry.resolve, registry.authorize)
        if options["tls_cert"]:
            try:
                server.use_tls(options["tls_cert"], options["tls_key"], options["tls_client_ca"])
            except (OSError, ssl.SSLError) as e:
                server.server_close()
                raise CommandError(f"cannot load the TLS files: {e}") from None
        health = None
        if health_address:
            try:
                health = HealthServer(health_address)
            except OSError as e:
                server.server_close()
                raise CommandError(f"cannot listen on --health-bind {options['health_bind']}: {e}") from None
            health.start()
        names = list(
            HostCluster.objects.filter(driver=HostCluster.Driver.KUBERNETES).values_list("name", flat=True)
        )
        registry.start(names)
        self.stdout.write(
            f"extender serving {', '.join(names) or 'no host cluster yet'} on {options['bind']}"
            + (f", /healthz on {options['health_bind']}" if health else "")
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            registry.stop()
            server.server_close()
            if health:
                health.shutdown()
                health.server_close()


def _address(option: str, value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not port.isdigit():
        raise CommandError(f"{option} must be host:port, not {value!r}")
    return host or "0.0.0.0", int(port)
