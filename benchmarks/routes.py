"""CPU per request, per route of the scale bench, in one process: ``python -m benchmarks.routes``.

``benchmarks.scale`` measures latency under load, which on a shared two-core machine is mostly waiting for a
CPU. This measures what each request costs, whatever else runs: the same data as the scale bench (a fresh
PostgreSQL database, the demo fleet, N tenants with their quotas, converged by a real ``gpucloud worker``),
then each route the scale clients call, requested one at a time through the WSGI application that ``gpucloud
web`` serves (same settings: PostgreSQL pool, Redis cache and broker, Prometheus multiprocess metrics), with
the bench's bearer token. Per route it prints the CPU time of this process per request (``time.process_time``:
Python, Django, psycopg; not PostgreSQL's own), the wall time, and the SQL statements run.

``--profile ROUTE`` prints cProfile's top functions for that route; ``--keep`` keeps the database and prints
how to reuse it with ``--database NAME`` (which skips the set-up).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.scale import (
    ROOT,
    SETUP,
    analyze,
    clear_broker,
    converged,
    cpu_seconds,
    drop_database,
    environment,
    fresh_database,
    python,
)

ROUTES = (
    "tenant-list",
    "tenant-detail",
    "quota-list",
    "usage",
    "capacity",
    "quota-set",
    "tenant-create",
    "tenant-delete",
)


def set_up(name: str, env: dict[str, str], tenants: int) -> None:
    """Migrate, load the demo fleet, create the tenants, and let one real worker converge them."""
    gpucloud = [sys.executable, "-m", "gpucloud.cli"]
    subprocess.run([*gpucloud, "migrate"], env=env, cwd=ROOT, check=True, capture_output=True)
    subprocess.run(
        [*gpucloud, "manage", "load_fleet", str(ROOT / "deploy/fleets/demo.yaml")],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    started = time.monotonic()
    python(SETUP, env, str(tenants))
    analyze(name)
    worker = subprocess.Popen(
        [*gpucloud, "worker"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 300
        while not converged(env) and time.monotonic() < deadline:
            time.sleep(1)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    print(f"{tenants} tenants created and converged in {time.monotonic() - started:.0f} s (database {name})")


class Caller:
    """Requests through the WSGI application, as gunicorn hands them over; counts SQL statements."""

    def __init__(self, token: str) -> None:
        from django.db import connection

        from gpucloud.wsgi import application

        self.application, self.connection = application, connection
        self.authorization = f"Bearer {token}"
        self.statements = 0

    def _count(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements += 1
        return execute(sql, params, many, context)

    def __call__(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, int]:
        path, _, query = path.partition("?")
        data = json.dumps(body).encode() if body is not None else b""
        environ = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": "",
            "PATH_INFO": "/api/v1" + path,
            "QUERY_STRING": query,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1:8000",
            "HTTP_AUTHORIZATION": self.authorization,
            "HTTP_ACCEPT_ENCODING": "identity",
            "HTTP_USER_AGENT": "Python-urllib/3.11",
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(data)),
            "wsgi.input": io.BytesIO(data),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": "http",
            "wsgi.version": (1, 0),
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        status: list[str] = []

        def start_response(line: str, headers: Any, exc_info: Any = None) -> Callable[[bytes], object]:
            status.append(line)
            return lambda data: None

        self.statements = 0
        with self.connection.execute_wrapper(self._count):
            result = self.application(environ, start_response)
            try:
                b"".join(result)
            finally:
                if hasattr(result, "close"):
                    result.close()
        return int(status[0].split()[0]), self.statements


class Mix:
    """The scale bench's requests, route by route (benchmarks/scale.py, Client.run)."""

    def __init__(self, call: Caller, slugs: list[str], seed: int = 1) -> None:
        from tenants.models import Quota

        self.call, self.slugs, self.random = call, slugs, random.Random(seed)
        # Each quota change changes something (as in the scale bench), whatever earlier runs left.
        a100 = Quota.objects.filter(gpu_class__name="a100-80gb", tenant__slug__in=slugs)
        self.burst = dict(a100.values_list("tenant__slug", "burst"))
        self.mine: list[str] = []

    def request(self, route: str) -> tuple[int, int]:
        slug = self.random.choice(self.slugs)
        if route == "tenant-list":
            return self.call("GET", "/tenants/?limit=50")
        if route == "tenant-detail":
            return self.call("GET", f"/tenants/{slug}/")
        if route == "quota-list":
            return self.call("GET", f"/tenants/{slug}/quotas/")
        if route == "usage":
            return self.call("GET", f"/usage/?tenant={slug}")
        if route == "capacity":
            return self.call("GET", "/fleet/capacity/")
        if route == "quota-set":
            self.burst[slug] = 3 - self.burst[slug]
            body = {"guaranteed": 0, "burst": self.burst[slug]}
            return self.call("PUT", f"/tenants/{slug}/quotas/a100-80gb/", body)
        if route == "tenant-create":
            new = f"r{uuid.uuid4().hex[:10]}"
            self.mine.append(new)
            return self.call("POST", "/tenants/", {"slug": new})
        if route == "tenant-delete":
            return self.call("DELETE", f"/tenants/{self.mine.pop()}/")
        raise ValueError(route)


def backends() -> float:
    """CPU seconds so far of the PostgreSQL server processes serving this database (Linux /proc)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " UNION ALL SELECT pg_backend_pid()"
        )
        pids = [pid for (pid,) in cursor.fetchall()]
    return sum(cpu_seconds(pid) or 0.0 for pid in pids)


def measure(mix: Mix, route: str, requests: int, warm: int) -> dict[str, Any]:
    for _ in range(warm):
        mix.request(route)
    cpu: list[float] = []
    wall: list[float] = []
    statements: list[int] = []
    statuses: Counter[int] = Counter()
    database = backends()
    for _ in range(requests):
        c0, w0 = time.process_time(), time.perf_counter()
        status, n = mix.request(route)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        statements.append(n)
        statuses[status] += 1
    database = backends() - database
    return {
        "route": route,
        "n": requests,
        "cpu_ms": 1000 * statistics.mean(cpu),
        "postgres_ms": 1000 * database / requests,
        "cpu_p50_ms": 1000 * statistics.median(cpu),
        "wall_p50_ms": 1000 * statistics.median(wall),
        "statements": statistics.median(statements),
        "statements_max": max(statements),
        "statuses": dict(statuses),
    }


def profile(mix: Mix, route: str, requests: int, warm: int, top: int, match: str) -> None:
    for _ in range(warm):
        mix.request(route)
    profiler = cProfile.Profile(time.process_time)  # CPU, not wall time: the machine may be busy
    profiler.enable()
    for _ in range(requests):
        mix.request(route)
    profiler.disable()
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(match, top)
        print(f"\n== {route}, {requests} requests, by {order}\n{out.getvalue()}")


def run(args: argparse.Namespace, env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.update(GPUCLOUD_PROCESS="web", GPUCLOUD_DB_POOL_MAX_SIZE="4")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="gpc-routes-metrics-")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from core.audit import Actor
    from tenants.models import Tenant
    from tenants.tokens import create_token

    admin = get_user_model().objects.get(username="bench")
    _, token = create_token(actor=Actor.system("bench"), user=admin, name="routes", scope="admin")
    slugs = list(Tenant.objects.filter(slug__regex=r"^t[0-9]{4}$").values_list("slug", flat=True))
    mix = Mix(Caller(token), slugs)
    routes = [args.profile] if args.profile else (args.route or list(ROUTES))
    if "tenant-delete" in routes and "tenant-create" not in routes:
        routes.insert(routes.index("tenant-delete"), "tenant-create")
    if args.profile:
        if args.profile == "tenant-delete":
            for _ in range(args.requests + args.warm):
                mix.request("tenant-create")
        profile(mix, args.profile, args.requests, args.warm, args.top, args.match)
        return
    results = [measure(mix, route, args.requests, args.warm) for route in routes]
    columns = f"{'CPU ms':>7} {'CPU p50':>7} {'PG ms':>6} {'wall p50':>8} {'SQL':>5}"
    print(f"{'route':15} {'n':>5} {columns}  statuses")
    for r in results:
        sql = f"{r['statements']:.0f}" + ("+" if r["statements_max"] > r["statements"] else "")
        print(
            f"{r['route']:15} {r['n']:5} {r['cpu_ms']:7.1f} {r['cpu_p50_ms']:7.1f} {r['postgres_ms']:6.1f}"
            f" {r['wall_p50_ms']:8.1f} {sql:>5}  {r['statuses']}"
        )
    weights = {"tenant-list": 16, "tenant-detail": 16, "quota-list": 16, "usage": 12, "capacity": 10}
    weights.update({"quota-set": 20, "tenant-create": 5, "tenant-delete": 5})
    by_route = {r["route"]: r for r in results}
    if set(weights) <= set(by_route):
        mean = sum(by_route[k]["cpu_ms"] * w for k, w in weights.items()) / sum(weights.values())
        pg = sum(by_route[k]["postgres_ms"] * w for k, w in weights.items()) / sum(weights.values())
        print(f"per request of the bench's mix (its weights): CPU {mean:.1f} ms, PostgreSQL {pg:.1f} ms")
    if args.json:
        print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200, help="timed requests per route")
    parser.add_argument("--warm", type=int, default=20, help="untimed requests per route first")
    parser.add_argument("--route", action="append", choices=ROUTES, help="only these routes (repeatable)")
    parser.add_argument("--profile", choices=ROUTES, help="print cProfile's top functions for one route")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match", default="", help="only functions whose file and name match this regex")
    parser.add_argument("--database", help="reuse a database kept by --keep (skips the set-up)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0]
    print(f"python -m benchmarks.routes {' '.join(sys.argv[1:])}; {when}; load before: {load:.2f}")
    name = args.database or fresh_database()
    env = environment(
        name,
        Path(tempfile.mkdtemp(prefix="gpc-routes-")),
        GPUCLOUD_SIM_PROVISION_DELAY="0",
        GPUCLOUD_SIM_DELETE_DELAY="0",
    )
    try:
        if not args.database:
            clear_broker()
            set_up(name, env, args.tenants)
        run(args, env)
    finally:
        clear_broker()  # the writes' reconciles, queued for a worker that is not running
        if args.keep or args.database:
            print(f"database kept: python -m benchmarks.routes --database {name}")
        else:
            drop_database(name)


if __name__ == "__main__":
    main()
