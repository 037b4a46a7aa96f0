"""`manage.py serve_gateway`: the inference gateway, the OpenAI API for the tenants' endpoints
(`inference.gateway.app`, docs/inference.md). `gpucloud gateway` runs this."""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from inference.gateway.app import redis_url, serve


class Command(BaseCommand):
    help = "Serve /v1/chat/completions, /v1/completions, /v1/embeddings and /v1/models until SIGTERM."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--bind", default="0.0.0.0:8080", help="host:port (default 0.0.0.0:8080)")

    def handle(self, *args: Any, **options: Any) -> None:
        host, _, port = options["bind"].rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"--bind takes host:port, not {options['bind']!r}")
        try:
            redis_url()
        except ValueError as e:
            raise CommandError(str(e)) from None

        def ready(bound: int) -> None:
            self.stdout.write(f"gateway serving the OpenAI API on {host}:{bound}", ending="\n")
            self.stdout.flush()

        try:
            asyncio.run(serve(host, int(port), ready))
        except OSError as e:
            raise CommandError(f"cannot listen on {options['bind']}: {e}") from None
