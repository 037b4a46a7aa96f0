from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.audit import Actor
from gitops import services
from gitops.models import GitSource
from gpucloud.errors import ServiceError


class Command(BaseCommand):
    help = "GitOps sources: add one, sync one now (exit code 1 when the sync failed), list them."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        add = commands.add_parser("add", help="register a git repository to keep applied")
        add.add_argument("name")
        add.add_argument("--url", required=True, help="https://, http:// or file:// git URL")
        add.add_argument("--branch", default="main")
        add.add_argument("--path", default="", help="folder inside the repository (default: all of it)")
        add.add_argument("--interval", type=int, default=300, help="seconds between syncs")
        add.add_argument("--username", default="")
        add.add_argument(
            "--password-env",
            metavar="VAR",
            help="read the password or token from this environment variable (never from the command line)",
        )
        add.add_argument(
            "--webhook-secret-env", metavar="VAR", help="read the webhook secret from this variable"
        )
        sync = commands.add_parser("sync", help="fetch and apply now")
        sync.add_argument("name")
        sync.add_argument(
            "--take-ownership",
            action="store_true",
            help="take what the commit declares and another source manages over for this source (audited)",
        )
        commands.add_parser("list", help="every source with its state, revision and error")

    def handle(self, *args: Any, command: str, **options: Any) -> None:
        getattr(self, f"_{command}")(**options)

    def _secret(self, variable: str | None) -> str:
        if variable is None:
            return ""
        if variable not in os.environ:
            raise CommandError(f"the environment variable {variable} is not set")
        return os.environ[variable]

    def _add(
        self, *, name: str, password_env: str | None, webhook_secret_env: str | None, **options: Any
    ) -> None:
        fields = {k: options[k] for k in ("url", "branch", "path", "interval", "username")}
        try:
            source = services.create_source(
                actor=Actor.console("gitops add"),
                name=name,
                password=self._secret(password_env),
                webhook_secret=self._secret(webhook_secret_env),
                **fields,
            )
        except ServiceError as exc:
            raise CommandError(f"{exc.detail}") from exc
        self.stdout.write(f"GitOps source {source.name}: {source.url} {source.branch} {source.path or '/'}")

    def _sync(self, *, name: str, take_ownership: bool, **options: Any) -> None:
        source = GitSource.objects.filter(name=name).first()
        if source is None:
            raise CommandError(f"there is no GitOps source {name!r}")
        taker = Actor.console("gitops sync --take-ownership") if take_ownership else None
        source = services.sync(source, take_ownership_by=taker)
        if source.state != GitSource.State.SYNCED:
            for problem in source.problems:
                self.stderr.write(
                    f"{problem['file']}:{problem['line'] or ''}: {problem['field']}: {problem['reason']}"
                )
            raise CommandError(f"sync of {name} failed: {source.error}")
        self.stdout.write(f"{name} synced at {source.last_revision[:12]}")
        for drifted in source.drift:
            self.stdout.write(f"drift restored:\n{drifted}")

    def _list(self, **options: Any) -> None:
        for source in GitSource.objects.all():
            revision = source.last_revision[:12] or "-"
            self.stdout.write(f"{source.name}\t{source.state}\t{revision}\t{source.url}\t{source.error}")
