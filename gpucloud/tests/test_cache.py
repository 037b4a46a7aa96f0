"""The shared cache's database backend (gpucloud/cache.py): counts of several threads and processes add up."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.cache import cache, caches
from django.db import connection

from gpucloud.cache import DatabaseCache

ROOT = Path(__file__).resolve().parents[2]
COUNT = """
import django; django.setup()
from django.core.cache import cache, caches
for _ in range({n}):
    cache.incr("shared")
"""


@pytest.mark.django_db(transaction=True)
def test_increments_from_many_threads_at_once_are_never_lost():
    assert isinstance(caches["default"], DatabaseCache)  # no GPUCLOUD_CACHE_URL: the database's
    cache.set("shared", 0, timeout=60)
    start = threading.Barrier(8)

    def count() -> None:
        start.wait()
        try:
            for _ in range(25):
                cache.incr("shared")
        finally:
            connection.close()

    threads = [threading.Thread(target=count) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert cache.get("shared") == 200


def test_the_embedded_defaults_cache_is_migrated_and_counts_across_processes(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "gpucloud.settings"}
    env["GPUCLOUD_VAR_DIR"] = str(tmp_path / "var")  # no DATABASE_URL: SQLite under var/
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, timeout=300)
    seed = "from django.core.cache import cache; cache.set('shared', 0, 300)"
    subprocess.run([*manage, "shell", "-c", seed], env=env, check=True, timeout=60)
    counters = [
        subprocess.Popen([sys.executable, "-c", COUNT.format(n=50)], env=env, cwd=ROOT) for _ in range(3)
    ]
    assert [counter.wait(timeout=120) for counter in counters] == [0, 0, 0]
    read = "from django.core.cache import cache; print(cache.get('shared'))"
    done = subprocess.run([*manage, "shell", "-c", read], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "150"
