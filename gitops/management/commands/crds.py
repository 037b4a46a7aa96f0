from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from gitops.crds import CRD_DIR, files


class Command(BaseCommand):
    help = (
        "Print the Tenant and RateCard CustomResourceDefinitions (derived from the manifests' JSON Schemas); "
        "--write puts them in deploy/kubernetes/crds/."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--write", action="store_true", help=f"write them to {CRD_DIR}")

    def handle(self, *args: Any, write: bool, **options: Any) -> None:
        for name, text in files().items():
            if write:
                (CRD_DIR / name).write_text(text, encoding="utf-8")
                self.stdout.write(f"wrote {CRD_DIR / name}")
            else:
                self.stdout.write(f"---\n{text}", ending="")
