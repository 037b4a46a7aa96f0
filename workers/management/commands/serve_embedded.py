from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Run web, a Celery worker and beat together (the embedded default); Ctrl-C stops all three."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default="127.0.0.1:8000")

    def handle(self, *args: Any, addr: str, **options: Any) -> None:
        metrics_dir = settings.VAR_DIR / "prometheus"
        metrics_dir.mkdir(exist_ok=True)
        for stale in metrics_dir.glob("*.db"):
            stale.unlink()
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
        python = sys.executable
        commands = {
            "web": [python, "manage.py", "runserver", addr, "--noreload"],
            "worker": [
                python,
                "-m",
                "celery",
                "-A",
                "gpucloud",
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
                python,
                "-m",
                "celery",
                "-A",
                "gpucloud",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                settings.CELERY_BEAT_SCHEDULE_FILENAME,
            ],
        }
        processes = {name: subprocess.Popen(cmd, env=env) for name, cmd in commands.items()}
        self.stdout.write(f"gpucloud is running on http://{addr}/ (web, worker, beat); Ctrl-C stops it")
        try:
            while all(p.poll() is None for p in processes.values()):
                time.sleep(0.5)
            dead = [name for name, p in processes.items() if p.poll() is not None]
            self.stderr.write(f"{', '.join(dead)} stopped; stopping the rest")
        except KeyboardInterrupt:
            pass
        finally:
            for process in processes.values():
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes.values():
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
