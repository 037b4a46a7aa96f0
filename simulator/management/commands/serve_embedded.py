from __future__ import annotations

import os
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from simulator.supervisor import Supervisor


class Command(BaseCommand):
    help = (
        "Run web, a Celery worker and beat together (the embedded default), restarting any that dies; "
        "Ctrl-C or SIGTERM stops all three."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default="127.0.0.1:8000")

    def handle(self, *args: Any, addr: str, **options: Any) -> None:
        metrics_dir = settings.VAR_DIR / "prometheus"
        metrics_dir.mkdir(exist_ok=True)
        for stale in metrics_dir.glob("*.db"):
            stale.unlink()
        # The children find gpucloud from any working directory, and write nothing relative to it.
        path = os.pathsep.join(p for p in (str(settings.BASE_DIR), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "PYTHONPATH": path}
        celery = [sys.executable, "-m", "celery", "-A", "gpucloud"]
        commands = {
            "web": [sys.executable, str(settings.BASE_DIR / "manage.py"), "runserver", addr, "--noreload"],
            "worker": [
                *celery,
                "worker",
                "-Q",
                "reconcile,default",
                "--pool",
                "threads",
                "--concurrency",
                "4",
                "--loglevel",
                "INFO",
            ],
            "beat": [
                *celery,
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                settings.CELERY_BEAT_SCHEDULE_FILENAME,
            ],
        }
        Supervisor(commands, env).run(
            on_started=lambda: self.stdout.write(
                f"gpucloud is running on http://{addr}/ (web, worker, beat); Ctrl-C stops it", ending="\n"
            )
        )
