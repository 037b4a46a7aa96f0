from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.audit import Actor
from gpucloud.errors import ServiceError
from tenants.tokens import create_token


class Command(BaseCommand):
    help = "Create an API token for a user and print it (it is shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="username the token acts as")
        parser.add_argument("--name", default="cli", help="a label to recognise the token by")
        parser.add_argument(
            "--scope", default="admin", choices=["read", "write", "admin"], help="what the token may do"
        )
        parser.add_argument(
            "--source", default="", help="the one manifest source POST /api/v1/apply/ applies as with it"
        )

    def handle(self, *args: Any, user: str, name: str, scope: str, source: str, **options: Any) -> None:
        account = get_user_model().objects.filter(username=user).first()
        if account is None:
            raise CommandError(f"there is no user called {user!r}")
        try:
            _, token = create_token(
                actor=Actor.console("create_token"), user=account, name=name, scope=scope, source=source
            )
        except ServiceError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(token)
