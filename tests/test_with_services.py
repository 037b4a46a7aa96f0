"""`scripts/with-services.sh`, which `make test` runs the suite under: two runs share nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def services_of_a_run() -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    done = subprocess.run(
        ["bash", "scripts/with-services.sh", "sh", "-c", 'echo "$DATABASE_URL $CELERY_BROKER_URL"'],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    database, broker = done.stdout.strip().splitlines()[-1].split()
    return database, broker


def test_two_runs_on_one_machine_get_their_own_database_and_broker():
    first, second = services_of_a_run(), services_of_a_run()
    assert first[0] != second[0], "both runs would create the same test database"
    assert first[1] != second[1], "both runs' workers would consume one queue"
