from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.audit import Actor
from tenants.services import platform_admins


class Command(BaseCommand):
    help = (
        "Make a user a platform administrator (everything, in every tenant), or stop them being one with "
        "--revoke. Audited as console:platform_admin."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--revoke", action="store_true", help="take platform administration away")

    def handle(self, *args: Any, username: str, revoke: bool, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"there is no user called {username!r}")
        changed = platform_admins.set_platform_admin(
            actor=Actor.console("platform_admin"), user=user, admin=not revoke
        )
        state = "no longer" if revoke else "now"
        self.stdout.write(
            f"{username} is {state} a platform administrator" + ("" if changed else " (unchanged)")
        )
