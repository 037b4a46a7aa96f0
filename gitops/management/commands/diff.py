from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.audit import Actor
from gitops.apply import apply
from gitops.management.commands.apply import console_source
from gitops.manifests import ManifestInvalid, read_path


class Command(BaseCommand):
    help = "Show what `apply -f PATH` would change, field by field; exit code 1 when anything differs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-f", "--filename", required=True, help="a manifest file or a folder of them")
        parser.add_argument("--prune", action="store_true", help="also show what --prune would remove")
        parser.add_argument("--source", help="the source apply would use (default: file:<absolute path>)")

    def handle(self, *args: Any, filename: str, prune: bool, **options: Any) -> None:
        source = console_source(options.get("source"), filename)
        try:
            # A dry run of the real apply: the same plan, carried out and rolled back, so a refusal by a
            # service (capacity, trust tier) shows here too.
            result = apply(
                read_path(Path(filename)),
                actor=Actor.console("diff"),
                source=source,
                prune=prune,
                dry_run=True,
            )
        except ManifestInvalid as exc:
            raise CommandError("apply would fail:\n" + "\n".join(str(p) for p in exc.problems)) from exc
        for change in result.changes:
            self.stdout.write(str(change))
        if result.changes:
            self.stdout.flush()
            sys.exit(1)
        self.stdout.write("no differences")
