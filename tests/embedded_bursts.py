"""Bursts of concurrent writes against a real embedded default (`make run`), as issue 10 reproduced its crash.

    python -m tests.embedded_bursts --bursts 5 --tenants 20

Starts `serve_embedded` on a fresh var/ directory, creates the tenants, then per burst sends one
`PATCH /api/v1/tenants/<slug>/` per tenant, all at once over HTTP, and waits until the broker's queues are
empty again. Prints per burst: answers that were not 200, the time the burst took, the time until the
reconciles it enqueued left the broker, and which of web, worker and beat were running afterwards (with their
process ids, so a restarted child shows as a new id).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.embedded import Embedded, children, embedded_default, embedded_env, request, wait_until

QUEUES = ("reconcile", "default")


def queued() -> int:
    """Messages waiting in the embedded broker's queues, asked through kombu as the worker sees them."""
    from gpucloud.celery import app

    with app.connection_for_read() as conn:
        channel = conn.default_channel
        return sum(channel.queue_declare(queue=name, passive=True).message_count for name in QUEUES)


def burst(running: Embedded, slugs: list[str], round_: int) -> list[int]:
    def patch(slug: str) -> int:
        url = f"{running.base}/api/v1/tenants/{slug}/"
        return request("PATCH", url, running.token, {"display_name": f"{slug} round {round_}"})[0]

    with ThreadPoolExecutor(len(slugs)) as pool:
        return list(pool.map(patch, slugs))


def drain_time(running: Embedded, started: float, timeout: float) -> float | None:
    """Seconds from the burst's start until its reconciles left the broker; None if they never did."""
    try:
        wait_until(lambda: running.server.poll() is not None or queued() == 0, timeout)
    except AssertionError:
        return None
    return time.monotonic() - started if running.server.poll() is None else None


def run(bursts: int, tenants: int, var_dir: Path) -> int:
    # This process reads the same broker as the embedded default, so it takes the same settings.
    env = embedded_env(var_dir)
    os.environ.clear()
    os.environ.update(env, DJANGO_SETTINGS_MODULE="gpucloud.settings")
    import django

    django.setup()
    slugs = [f"burst-{i:02d}" for i in range(tenants)]
    failures = 0
    with embedded_default(var_dir) as running:
        for slug in slugs:
            assert request("POST", f"{running.base}/api/v1/tenants/", running.token, {"slug": slug})[0] == 201
        print(f"serve_embedded pid {running.server.pid}, processes {children(running.server.pid)}")
        print("burst  not-200  burst s  drained s  running afterwards")
        for round_ in range(1, bursts + 1):
            started = time.monotonic()
            statuses = burst(running, slugs, round_)
            took = time.monotonic() - started
            drained = drain_time(running, started, 60)
            alive = children(running.server.pid) if running.server.poll() is None else {}
            errors = sum(status != 200 for status in statuses)
            failures += errors + (0 if set(alive) == {"web", "worker", "beat"} else 1)
            drained_text = f"{drained:9.2f}" if drained is not None else "    never"
            running_text = alive or "serve_embedded exited"
            print(f"{round_:5d}  {errors:7d}  {took:7.2f}  {drained_text}  {running_text}")
        log = running.log().splitlines()
        for what in ("Unrecoverable error", "could not enqueue", "database is locked", "Traceback"):
            lines = [line for line in log if what in line]
            print(f"log lines with {what!r}: {len(lines)}" + (f"; first: {lines[0][:160]}" if lines else ""))
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--tenants", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpucloud-bursts-") as tmp:
        failures = run(args.bursts, args.tenants, Path(tmp) / "var")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
