from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.audit import Actor
from core.declared import source_problem
from gitops.apply import apply
from gitops.manifests import ManifestInvalid, read_path


def default_source(path: str) -> str:
    """Objects applied from one file or folder belong to it: `file:<absolute path>`."""
    return f"file:{Path(path).resolve()}"


def console_source(named: str | None, path: str) -> str:
    """The source the console applies as: `--source`, which may not be a GitOps source's, a custom
    resource's or the API's (those doors set their own), else the file or folder."""
    if not named:
        return default_source(path)
    problem = source_problem(named)
    if problem is not None:
        raise CommandError(f"--source: {problem}")
    return named


class Command(BaseCommand):
    help = "Apply manifests (a file, or every *.yaml/*.yml/*.json in a folder) in one transaction."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-f", "--filename", required=True, help="a manifest file or a folder of them")
        parser.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
        parser.add_argument(
            "--prune", action="store_true", help="remove objects earlier applied from this source, now absent"
        )
        parser.add_argument("--source", help="who owns what is applied (default: file:<absolute path>)")
        parser.add_argument(
            "--take-ownership",
            action="store_true",
            help="take declared objects another source manages over for this one (audited), not refuse them",
        )

    def handle(
        self, *args: Any, filename: str, dry_run: bool, prune: bool, take_ownership: bool, **options: Any
    ) -> None:
        source = console_source(options.get("source"), filename)
        try:
            documents = read_path(Path(filename))
            result = apply(
                documents,
                actor=Actor.console("apply"),
                source=source,
                prune=prune,
                dry_run=dry_run,
                take_ownership=take_ownership,
            )
        except ManifestInvalid as exc:
            raise CommandError("nothing was applied:\n" + "\n".join(str(p) for p in exc.problems)) from exc
        for change in result.changes:
            self.stdout.write(str(change))
        verb = "would change" if dry_run else "changed"
        self.stdout.write(f"{len(result.changes)} object(s) {verb}" + (" (dry run)" if dry_run else ""))
