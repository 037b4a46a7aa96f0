"""Scale-out on one machine: ``python -m benchmarks.scale [--tenants 1000 --clients 50 --duration 60]``.

Starts the production processes (``gpucloud web`` ×2 with two gunicorn workers each, ``gpucloud worker`` ×2,
one ``gpucloud scheduler``) on a fresh PostgreSQL database (on the server of DATABASE_URL) and the Redis of
CELERY_BROKER_URL, with the demo fleet as a simulated host cluster; creates N tenants with quotas; runs C
concurrent API clients for a fixed time — reads of tenants, quotas, usage and capacity, quota changes, tenant
creation and deletion — and SIGKILLs one worker halfway. Then waits until every tenant has converged and
checks the invariants: no 5xx, capacity never overcommitted, each tenant's lifecycle step recorded exactly
once, each audit event written once per change, the simulated clusters holding exactly the database's quotas.

The clients are closed-loop by default: each sends its next request as soon as the last is answered, so
the figures are those of a saturated server (requests/s × mean latency = clients). ``--rate R`` makes them
open-loop instead: together they start R requests per second at random (Poisson) times, and each latency is
counted from when its request was due, so a request that waited behind a slow one counts the wait (no
coordinated omission); that gives the latency at a stated load below saturation.

With ``--embedded`` it then runs the same load against the single-process embedded default (``manage.py
serve_embedded`` on SQLite) for comparison. Prints the command's figures; BENCHMARKS.md keeps them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
READS = ("tenant-list", "tenant-detail", "quota-list", "usage", "capacity")


@dataclass
class Tally:
    """What the clients saw: latencies per route class, statuses, the changes that succeeded."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    quota_sets: int = 0
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    last_change: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, route: str, seconds: float, status: int) -> None:
        with self.lock:
            self.latencies[route].append(seconds)
            self.statuses[(route, status)] += 1


class Client(threading.Thread):
    """One API client: its own keep-alive connection and its own tenants (so each quota change changes)."""

    def __init__(
        self,
        number: int,
        ports: list[int],
        token: str,
        tenants: list[str],
        until: float,
        tally: Tally,
        rate: float = 0.0,
    ):
        super().__init__(daemon=True)
        self.rate = rate  # requests per second this client starts (open loop); 0: closed loop
        self.due = 0.0
        self.port = ports[number % len(ports)]
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.tenants, self.until, self.tally = tenants, until, tally
        self.burst = dict.fromkeys(tenants, 1)
        self.random = random.Random(number)
        self.mine: list[str] = []
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def call(self, route: str, method: str, path: str, body: dict[str, Any] | None = None) -> int:
        started = self.due or time.perf_counter()
        if self.conn.sock is not None and select.select([self.conn.sock], [], [], 0)[0]:
            # Readable while idle: the server closed the kept-alive connection (gunicorn's keepalive, 5 s);
            # open a new one first, as urllib3 checks a pooled connection before it reuses it.
            self.conn.close()
        try:
            self.conn.request(method, "/api/v1" + path, json.dumps(body) if body else None, self.headers)
            response = self.conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            status = 0
        self.tally.record(route, time.perf_counter() - started, status)
        return status

    def run(self) -> None:
        if self.rate:
            self.due = time.perf_counter() + self.random.expovariate(self.rate)
        while time.monotonic() < self.until:
            if self.rate:
                time.sleep(max(0.0, self.due - time.perf_counter()))
            self.step()
            if self.rate:
                self.due += self.random.expovariate(self.rate)

    def step(self) -> None:
        """One request of the mix."""
        roll, slug = self.random.random(), self.random.choice(self.tenants)
        if roll < 0.16:
            self.call("tenant-list", "GET", "/tenants/?limit=50")
        elif roll < 0.32:
            self.call("tenant-detail", "GET", f"/tenants/{slug}/")
        elif roll < 0.48:
            self.call("quota-list", "GET", f"/tenants/{slug}/quotas/")
        elif roll < 0.60:
            self.call("usage", "GET", f"/usage/?tenant={slug}")
        elif roll < 0.70:
            self.call("capacity", "GET", "/fleet/capacity/")
        elif roll < 0.90:
            self.burst[slug] = 3 - self.burst[slug]  # 1 ↔ 2: every change is a change
            status = self.call(
                "quota-set",
                "PUT",
                f"/tenants/{slug}/quotas/a100-80gb/",
                {"guaranteed": 0, "burst": self.burst[slug]},
            )
            self.changed(status in (200, 201), "quota")
        elif roll < 0.95 or not self.mine:
            new = f"b{uuid.uuid4().hex[:10]}"
            if self.changed(self.call("tenant-create", "POST", "/tenants/", {"slug": new}) == 201, "create"):
                self.mine.append(new)
                self.tally.created.append(new)
        else:
            gone = self.mine.pop(0)
            if self.changed(self.call("tenant-delete", "DELETE", f"/tenants/{gone}/") == 202, "delete"):
                self.tally.deleted.append(gone)

    def changed(self, ok: bool, what: str) -> bool:
        if ok:
            with self.tally.lock:
                self.tally.last_change = time.monotonic()
                if what == "quota":
                    self.tally.quota_sets += 1
        return ok


def database_url(name: str) -> str:
    return urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path="/" + name))


def fresh_database() -> str:
    name = f"gpc_scale_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def analyze(name: str) -> None:
    """Give the planner statistics of the tables the set-up filled, as autovacuum would on a database that
    has been running (this machine's PostgreSQL runs with autovacuum off: without this, a fresh database is
    planned as if every table were empty, and joins over a thousand tenants become nested loops)."""
    with psycopg.connect(database_url(name), autocommit=True) as conn:
        conn.execute("ANALYZE")


def drop_database(name: str) -> None:
    with psycopg.connect(database_url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


SETUP = """
import django, sys, json
django.setup()
from django.contrib.auth import get_user_model
from fleet.models import GpuClass
from tenants.services import lifecycle, quotas
from core.audit import Actor
from tenants.tokens import create_token
admin = get_user_model().objects.create_superuser("bench", "bench@localhost", "x")
actor = Actor.of(admin)
a100 = GpuClass.objects.get(name="a100-80gb")
h200 = GpuClass.objects.get(name="h200-141gb")
slugs = []
for i in range(int(sys.argv[1])):
    tenant = lifecycle.create_tenant(actor=actor, slug=f"t{i:04d}")
    quotas.set_quota(actor=actor, tenant=tenant, gpu_class=a100, guaranteed=0, burst=1)
    if i < 60:
        quotas.set_quota(actor=actor, tenant=tenant, gpu_class=h200, guaranteed=1, burst=0)
    slugs.append(tenant.slug)
_, token = create_token(actor=Actor.system("bench"), user=admin, name="bench", scope="admin")
print(json.dumps({"token": token, "slugs": slugs}))
"""

CHECKS = """
import django, json
django.setup()
from collections import Counter
from django.db.models import Sum
from fleet.models import Gpu
from core.models import AuditEvent
from tenants.models import Quota, Tenant
from clusters.models import SimulatedTenantCluster
actions = Counter(AuditEvent.objects.values_list("action", flat=True))
lifecycle = ["tenant.provisioning", "tenant.ready", "tenant.deleted"]
steps = Counter(AuditEvent.objects.filter(action__in=lifecycle).values_list("object_id", "action"))
guaranteed = dict(Quota.objects.values_list("gpu_class__gpu_model__slug").annotate(g=Sum("guaranteed")))
gpus = Counter(Gpu.objects.values_list("gpu_model__slug", flat=True))
live = Tenant.objects.exclude(state="deleted").prefetch_related("quotas__gpu_class")
clusters = {c.slug: c.quotas for c in SimulatedTenantCluster.objects.all()}
def wanted(t):
    return sorted((q.gpu_class.name, q.guaranteed, q.burst) for q in t.quotas.all())
def held(slug):
    return sorted((q["gpu_class"], q["guaranteed"], q["burst"]) for q in clusters.get(slug, []))
print(json.dumps({
    "actions": actions,
    "steps_more_than_once": sum(1 for n in steps.values() if n > 1),
    "overcommitted": {m: [g, gpus[m]] for m, g in guaranteed.items() if g > gpus[m]},
    "not_ready": [t.slug for t in Tenant.objects.exclude(state__in=["ready", "deleted"])][:20],
    "quota_mismatch": [t.slug for t in live if wanted(t) != held(t.slug)][:20],
}))
"""


def converged(env: dict[str, str]) -> bool:
    probe = (
        "import django; django.setup(); from tenants.models import Tenant; "
        "print(Tenant.objects.exclude(state__in=['ready', 'deleted']).count())"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=ROOT
    ).stdout
    return out.strip() == "0"


def python(code: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode:
        sys.exit(done.stderr)
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def wait_http(port: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz", headers={"Host": "localhost"})
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    sys.exit(f"port {port} did not answer within {timeout} s")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load(
    ports: list[int],
    token: str,
    slugs: list[str],
    clients: int,
    duration: float,
    kill: Callable[[], None] | None = None,
    rate: float = 0.0,
) -> tuple[Tally, float]:
    tally, started = Tally(), time.monotonic()
    until = started + duration
    share = [slugs[i::clients] for i in range(clients)]
    threads = [Client(i, ports, token, share[i], until, tally, rate / clients) for i in range(clients)]
    for thread in threads:
        thread.start()
    if kill:
        time.sleep(duration / 2)
        kill()
    for thread in threads:
        thread.join()
    return tally, time.monotonic() - started


def loop(args: argparse.Namespace) -> str:
    return f", open loop at {args.rate:g} requests/s" if args.rate else ", closed loop"


def report(title: str, tally: Tally, elapsed: float) -> None:
    total = sum(tally.statuses.values())
    print(f"\n== {title}: {total} requests in {elapsed:.1f} s = {total / elapsed:.0f} requests/s")
    print(f"{'route':15} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}  statuses")
    for route, seconds in sorted(tally.latencies.items()):
        q = statistics.quantiles(seconds, n=100) if len(seconds) > 1 else seconds * 99
        statuses = {s: n for (r, s), n in tally.statuses.items() if r == route}
        print(
            f"{route:15} {len(seconds):6} {q[49] * 1000:8.0f} {q[94] * 1000:8.0f} {q[98] * 1000:8.0f}"
            f"  {statuses}"
        )
    for kind, routes in (("reads", READS), ("writes", ("quota-set", "tenant-create", "tenant-delete"))):
        seconds = [s for r in routes for s in tally.latencies.get(r, [])]
        if len(seconds) > 1:
            q = statistics.quantiles(seconds, n=100)
            print(
                f"all {kind:11} {len(seconds):6} {q[49] * 1000:8.0f} {q[94] * 1000:8.0f} {q[98] * 1000:8.0f}"
            )
    errors = sum(n for (_, s), n in tally.statuses.items() if s >= 500 or s == 0)
    print(f"5xx or no answer: {errors}")


def max_connections(name: str, stop: threading.Event, seen: Counter[str], cpu: CpuMeter) -> None:
    with psycopg.connect(database_url("postgres"), autocommit=True) as conn:
        while not stop.is_set():
            rows = conn.execute(
                "SELECT application_name, count(*), array_agg(pid) FROM pg_stat_activity"
                " WHERE datname = %s GROUP BY 1",
                [name],
            ).fetchall()
            for app, count, pids in rows:
                seen[app] = max(seen[app], count)
                cpu.sample("postgres", pids)
            cpu.sample("bench", [os.getpid()])
            stop.wait(0.5)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of one process so far (Linux /proc), or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def process_tree() -> dict[int, list[int]]:
    """Each process's children (Linux /proc)."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children[ppid].append(int(entry.name))
    return children


def descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    """`pid` and every process under it (gunicorn's workers under its master)."""
    out, todo = [], [pid]
    while todo:
        out.append(todo.pop())
        todo.extend(children.get(out[-1], []))
    return out


class CpuMeter:
    """CPU seconds each kind of process (web, worker, scheduler, PostgreSQL backends, the bench's clients)
    spends during the load phase: /proc sampled twice a second, the last figure of a process kept after it
    dies (the killed worker's work until its death counts), so the work per request is measured whatever
    else shares the machine."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.start: dict[int, float] = {}
        self.last: dict[tuple[str, int], float] = {}
        self.started = False

    def sample(self, kind: str, pids: list[int]) -> None:
        for pid in pids:
            seconds = cpu_seconds(pid)
            if seconds is None:
                continue
            with self.lock:
                if self.started:
                    self.last[(kind, pid)] = seconds
                else:
                    self.start[pid] = seconds

    def begin(self) -> None:
        with self.lock:
            self.started = True

    def by_kind(self) -> dict[str, float]:
        with self.lock:
            out: dict[str, float] = defaultdict(float)
            for (kind, pid), seconds in self.last.items():
                out[kind] += seconds - self.start.get(pid, 0.0)
            return dict(out)


def watch_processes(
    processes: dict[str, subprocess.Popen[bytes]], stop: threading.Event, cpu: CpuMeter
) -> None:
    while not stop.is_set():
        children = process_tree()
        for label, process in processes.items():
            cpu.sample(label.rstrip("0123456789"), descendants(process.pid, children))
        stop.wait(0.5)


def clear_broker() -> None:
    """Nothing queued or scheduled from an earlier run on this Redis."""
    import redis

    client = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
    for key in [*client.scan_iter("gpucloud-redbeat*"), b"reconcile", b"default"]:
        client.delete(key)


def environment(name: str, var: Path, **settings: str) -> dict[str, str]:
    """The environment of the processes a bench starts on the database `name`, with `settings` on top."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(
        DATABASE_URL=database_url(name),
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="gpucloud.settings",
        GPUCLOUD_VAR_DIR=str(var),
        GPUCLOUD_HTTPS="false",
        GPUCLOUD_REQUEUE_DELAY="0.5",
        GPUCLOUD_METRICS_PORT="0",
        GPUCLOUD_CACHE_URL=os.environ["CELERY_BROKER_URL"],
        LOG_LEVEL="WARNING",
        **settings,
    )
    env.setdefault("SECRET_KEY", "bench-" + "x" * 50)
    env.setdefault("GPUCLOUD_ENCRYPTION_KEYS", "Ni1-sjkjCJx0Qm3HT3UxGrSgJjB5bW8-UbrMRRWSR9E=")
    return env


def production(args: argparse.Namespace) -> None:
    clear_broker()
    name = fresh_database()
    var = Path(tempfile.mkdtemp(prefix="gpc-scale-"))
    env = environment(
        name,
        var,
        GPUCLOUD_SIM_PROVISION_DELAY="1",
        GPUCLOUD_SIM_DELETE_DELAY="0.5",
        GPUCLOUD_WEB_WORKERS="2",
    )
    # Threads per gunicorn worker and per Celery worker: the environment may say (docs/operations.md).
    env.setdefault("GPUCLOUD_WEB_THREADS", "4")
    env.setdefault("GPUCLOUD_WORKER_CONCURRENCY", "4")
    print(
        f"web: 2 × {env['GPUCLOUD_WEB_WORKERS']} gunicorn workers × {env['GPUCLOUD_WEB_THREADS']} threads;"
        f" workers: 2 × {env['GPUCLOUD_WORKER_CONCURRENCY']} threads"
    )
    processes: dict[str, subprocess.Popen[bytes]] = {}
    seen: Counter[str] = Counter()
    stop = threading.Event()
    cpu = CpuMeter()
    try:
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
        setup = python(SETUP, env, str(args.tenants))
        print(
            f"{args.tenants} tenants with quotas created in {time.monotonic() - started:.0f} s"
            " (their reconciles queued)"
        )
        analyze(name)
        ports = [free_port() for _ in range(2)]
        log = (var / "processes.log").open("w")
        for i, port in enumerate(ports):
            processes[f"web{i}"] = subprocess.Popen(
                [*gpucloud, "web", "--bind", f"127.0.0.1:{port}"], env=env, cwd=ROOT, stdout=log, stderr=log
            )
        for i in range(2):
            processes[f"worker{i}"] = subprocess.Popen(
                [*gpucloud, "worker"], env=env, cwd=ROOT, stdout=log, stderr=log
            )
        processes["scheduler"] = subprocess.Popen(
            [*gpucloud, "scheduler"], env=env, cwd=ROOT, stdout=log, stderr=log
        )
        for port in ports:
            wait_http(port)
        threading.Thread(target=max_connections, args=(name, stop, seen, cpu), daemon=True).start()
        threading.Thread(target=watch_processes, args=(processes, stop, cpu), daemon=True).start()
        deadline = time.monotonic() + 120
        while not converged(env) and time.monotonic() < deadline:
            time.sleep(0.5)
        print(
            f"the {args.tenants} tenants converged {time.monotonic() - started:.0f} s"
            " after their creation began"
        )

        def kill_worker() -> None:
            processes["worker0"].send_signal(signal.SIGKILL)
            print(f"killed worker0 (pid {processes['worker0'].pid}) at {args.duration / 2:.0f} s")

        time.sleep(1)  # every process sampled once: the load phase's CPU is counted from here
        cpu.begin()
        tally, elapsed = load(
            ports, setup["token"], setup["slugs"], args.clients, args.duration, kill_worker, args.rate
        )
        time.sleep(0.6)  # and sampled once more after the last request
        used = cpu.by_kind()
        report(f"production processes, {args.clients} clients{loop(args)}", tally, elapsed)
        total = sum(tally.statuses.values())
        cpus = os.cpu_count() or 1
        print(
            f"CPU during the load phase: {sum(used.values()):.1f} s of {cpus * elapsed:.0f} s on {cpus} CPUs;"
            " per request, ms: "
            + ", ".join(f"{kind} {1000 * s / total:.1f}" for kind, s in sorted(used.items()))
            + f"; all {1000 * sum(used.values()) / total:.1f}"
        )
        deadline = time.monotonic() + 180
        while not converged(env) and time.monotonic() < deadline:
            time.sleep(0.25)
        print(
            f"converged {time.monotonic() - tally.last_change:.1f} s after the last change"
            if converged(env)
            else "NOT converged within 180 s"
        )
        stop.set()
        print(f"most PostgreSQL connections at once, by process: {dict(seen)}")
        checks = python(CHECKS, env)
        actions = checks["actions"]
        print("invariants:")
        print(f"  capacity overcommitted: {checks['overcommitted'] or 'never'}")
        print(f"  lifecycle steps recorded more than once: {checks['steps_more_than_once']}")
        print(
            f"  tenants not converged: {checks['not_ready'] or 'none'};"
            f" quotas not on their cluster: {checks['quota_mismatch'] or 'none'}"
        )
        for action, setup_count, api_count in (
            ("quota.set", args.tenants + 60, tally.quota_sets),
            ("tenant.create", args.tenants, len(tally.created)),
        ):
            audited = actions.get(action, 0)
            print(
                f"  {action} audited {audited} = setup {setup_count} + API {api_count}: "
                f"{audited == setup_count + api_count}"
            )
        print(
            f"  tenant.delete audited {actions.get('tenant.delete', 0)} = API {len(tally.deleted)}:"
            f" {actions.get('tenant.delete', 0) == len(tally.deleted)}"
        )
    finally:
        stop.set()
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        drop_database(name)


def embedded(args: argparse.Namespace) -> None:
    var = Path(tempfile.mkdtemp(prefix="gpc-scale-embedded-"))
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "SECRET_KEY",
            "GPUCLOUD_ENCRYPTION_KEYS",
            "PROMETHEUS_MULTIPROC_DIR",
        )
    }
    env.update(
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="gpucloud.settings",
        GPUCLOUD_VAR_DIR=str(var),
        GPUCLOUD_SIM_PROVISION_DELAY="1",
        GPUCLOUD_SIM_DELETE_DELAY="0.5",
        GPUCLOUD_REQUEUE_DELAY="0.5",
        GPUCLOUD_SIM_WORKLOADS="false",
        LOG_LEVEL="WARNING",
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    subprocess.run(
        [sys.executable, "manage.py", "load_fleet", str(ROOT / "deploy/fleets/demo.yaml")],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    setup = python(SETUP, env, str(args.tenants))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "serve_embedded", "--addr", f"127.0.0.1:{port}"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_http(port)
        tally, elapsed = load(
            [port], setup["token"], setup["slugs"], args.clients, args.duration, rate=args.rate
        )
        report(f"embedded default (one machine, SQLite), {args.clients} clients{loop(args)}", tally, elapsed)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="open loop: requests per second the clients start together (default: closed loop)",
    )
    parser.add_argument("--embedded", action="store_true", help="also measure the embedded default")
    args = parser.parse_args()
    print(
        f"python -m benchmarks.scale --tenants {args.tenants} --clients {args.clients}"
        f" --duration {args.duration:.0f}{f' --rate {args.rate:g}' if args.rate else ''}"
        f"{' --embedded' if args.embedded else ''}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"load before: {os.getloadavg()[0]:.2f}"
    )
    production(args)
    if args.embedded:
        embedded(args)


if __name__ == "__main__":
    main()
