from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from core.audit import Actor
from tenants.tokens import create_token


class Command(BaseCommand):
    help = "First-run setup of the embedded default: the demo fleet, an admin account and its API token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--addr", default="127.0.0.1:8000", help="where the portal is served (serve_embedded's --addr)"
        )

    def handle(self, *args: Any, addr: str = "127.0.0.1:8000", **options: Any) -> None:
        call_command("load_fleet", settings.GPUCLOUD_FLEET, stdout=self.stdout)
        users = get_user_model().objects
        if users.filter(username="admin").exists():
            self.stdout.write("admin exists; its password and token were printed on the first run")
            return
        password = secrets.token_urlsafe(12)
        admin = users.create_superuser("admin", "admin@localhost", password)
        _, token = create_token(actor=Actor.system("bootstrap"), user=admin, name="bootstrap", scope="admin")
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "  gpucloud is set up. Keep these; they are shown only now.",
                    f"  portal     http://{addr}/   user admin",
                    f"  password   {password}",
                    f"  API token  {token}",
                    "",
                ]
            )
        )
