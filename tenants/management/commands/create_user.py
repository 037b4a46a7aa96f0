from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.audit import Actor
from gpucloud.errors import ServiceError
from tenants.users import create_local_user


class Command(BaseCommand):
    help = (
        "Make a local account, as the portal's Users page does, and print its generated password (shown "
        "only this once). An account of that name already there is left as it is: running it twice is "
        "harmless. Audited as console:create_user."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--email", default="", help="invitations to this address become theirs")

    def handle(self, *args: Any, username: str, email: str, **options: Any) -> None:
        try:
            _, password = create_local_user(
                actor=Actor.console("create_user"), username=username, email=email
            )
        except ServiceError as error:
            if error.errors.get("username") == ["taken"]:  # made before, here or on the Users page
                self.stdout.write(f"{username} has an account already; nothing changed")
                return
            raise CommandError(error.detail) from None
        self.stdout.write(f"{username} can now sign in with the password {password} (shown only this once)")
