"""`gpucloud`: the production processes, one command each (docs/operations.md).

    gpucloud web [--bind ADDR]   gunicorn serving the portal and the API; JSON access log; graceful shutdown
    gpucloud worker              a Celery worker; queues and concurrency from the environment
    gpucloud scheduler           Celery beat with RedBeat: only the holder of a Redis lock fires the schedule
    gpucloud migrate             apply migrations and exit; several at once wait for each other
    gpucloud tenant-watcher      apply the Tenant and RateCard custom resources of host clusters registered
                                 with --watch-tenants (`manage.py watch_tenants`; docs/gitops.md)
    gpucloud extender            kube-scheduler's extender for Kubernetes host clusters (`serve_extender`,
                                 docs/placement.md): exactly one, its assumed placements are in memory
    gpucloud gateway [--bind]    the inference gateway, the OpenAI API for the tenants' endpoints
                                 (`serve_gateway`, docs/inference.md); drains on SIGTERM
    gpucloud manage ARGS…        any `manage.py` command (collectstatic, createsuperuser, bootstrap, …)

Each process names itself (GPUCLOUD_PROCESS, shown by PostgreSQL as the connection's application_name) and
sizes its database pool to the threads that can hold a connection at once, unless GPUCLOUD_DB_POOL_MAX_SIZE
says otherwise. `make run` stays the embedded default; this is how gpucloud runs on PostgreSQL and Redis.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gpucloud import __version__
from gpucloud.env import ConfigError, env_choice, env_int, env_str

# Any fixed 64-bit number shared by every `gpucloud migrate`: the PostgreSQL advisory lock they queue on.
MIGRATION_LOCK = 0x67_70_63_6D_69_67_72_61  # "gpcmigra"


def _become(process: str, *, connections: int) -> None:
    """Name this process and size its database pool, then load Django."""
    os.environ["GPUCLOUD_PROCESS"] = process
    os.environ.setdefault("GPUCLOUD_DB_POOL_MAX_SIZE", str(connections))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
    import django

    django.setup()


def web(args: argparse.Namespace) -> None:
    from gunicorn.app.wsgiapp import run

    bind = args.bind or env_str("GPUCLOUD_BIND", "0.0.0.0:8000")
    # Each gthread worker serves GPUCLOUD_WEB_THREADS requests at once, each holding one connection at most.
    os.environ["GPUCLOUD_PROCESS"] = "web"
    os.environ.setdefault("GPUCLOUD_DB_POOL_MAX_SIZE", str(env_int("GPUCLOUD_WEB_THREADS", 4, minimum=1)))
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Several gunicorn workers answer /metrics in turn: each must report the counters of all of them.
        tmp = env_str("GPUCLOUD_WEB_TMP_DIR") or None
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="gpucloud-metrics-", dir=tmp)
    sys.argv = ["gpucloud web", "--config", "python:gpucloud.gunicorn_conf", "--bind", bind]
    run()


def worker(args: argparse.Namespace) -> None:
    concurrency = env_int("GPUCLOUD_WORKER_CONCURRENCY", 4, minimum=1)
    # Threads by default: tasks wait on PostgreSQL and the clusters' APIs, and one process keeps one pool and
    # one set of metrics. prefork is there for CPU-heavy work (then metrics come only from the main process).
    pool = env_choice("GPUCLOUD_WORKER_POOL", "threads", {"threads", "prefork", "solo"})
    queues = env_str("GPUCLOUD_WORKER_QUEUES", "reconcile,default")
    metrics_port = env_int("GPUCLOUD_METRICS_PORT", 9808, minimum=0)
    _become("worker", connections=concurrency if pool == "threads" else 1)
    from django.conf import settings
    from prometheus_client import REGISTRY, start_http_server

    from gpucloud.celery import app
    from gpucloud.observability import QueueDepth

    if metrics_port:  # a worker serves no HTTP of its own: its reconcile and task metrics are scraped here
        REGISTRY.register(QueueDepth(app, queues.split(",")))
        start_http_server(metrics_port)
    app.worker_main(
        [
            "worker",
            f"--queues={queues}",
            f"--concurrency={concurrency}",
            f"--pool={pool}",
            f"--loglevel={settings.LOG_LEVEL}",
            "--without-gossip",
            "--without-mingle",
        ]
    )


def _serve_liveness(max_age: float) -> None:
    """GET /healthz on GPUCLOUD_HEALTH_PORT for a process that serves no HTTP (the manifests set 8081). Off by
    default: on one machine (`make serve`, the tests) several such processes would want the same port."""
    from gpucloud import liveness

    port = env_int("GPUCLOUD_HEALTH_PORT", 0, minimum=0)
    if port:
        try:
            liveness.serve(port, max_age)
        except OSError as exc:
            raise ConfigError(f"GPUCLOUD_HEALTH_PORT={port}: cannot listen there: {exc.strerror}") from None


def scheduler(args: argparse.Namespace) -> None:
    _become("scheduler", connections=1)
    from django.conf import settings

    from gpucloud.celery import app

    if not settings.CELERY_REDBEAT_REDIS_URL:
        raise ConfigError(
            "gpucloud scheduler keeps its schedule and leader lock in Redis: set CELERY_BROKER_URL=redis://… "
            "or GPUCLOUD_SCHEDULER_REDIS_URL=redis://… (make run's embedded default runs its own beat)"
        )
    # The leader's loop comes round every CELERY_BEAT_MAX_LOOP_INTERVAL; one that has not within the lock
    # timeout has lost its lock anyway. A standby waiting for the lock has not beaten yet: alive.
    _serve_liveness(max_age=settings.CELERY_REDBEAT_LOCK_TIMEOUT)
    app.start(["beat", "--scheduler=gpucloud.beat:Scheduler", f"--loglevel={settings.LOG_LEVEL}"])


@contextmanager
def _migration_lock() -> Iterator[None]:
    """On PostgreSQL, hold an advisory lock on a connection of its own while migrating.

    Two `gpucloud migrate` started together (two Helm hooks, a Job retried while the first still runs) would
    otherwise both create the same tables. The second waits here, then finds nothing left to apply. The lock
    dies with the session, so a killed migration never leaves it held.
    """
    from django.db import connection

    if connection.vendor != "postgresql":
        yield
        return
    import psycopg

    params = connection.settings_dict
    with psycopg.connect(
        dbname=params["NAME"],
        user=params["USER"] or None,
        password=params["PASSWORD"] or None,
        host=params["HOST"] or None,
        port=params["PORT"] or None,
        application_name="gpucloud-migrate-lock",
        autocommit=True,
    ) as lock:
        lock.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK])
        yield


def migrate(args: argparse.Namespace) -> None:
    _become("migrate", connections=1)
    from django.core.management import call_command

    with _migration_lock():
        call_command("migrate", interactive=False)


def tenant_watcher(args: argparse.Namespace) -> None:
    # Two threads per watching host cluster (Tenants, RateCards), each holding a connection while it applies.
    _become("tenant-watcher", connections=env_int("GPUCLOUD_TENANT_WATCHER_CONNECTIONS", 8, minimum=1))
    from django.conf import settings
    from django.core.management import call_command

    # Its loop comes round once per resync (picking up new host clusters, restarting ended watches).
    _serve_liveness(max_age=2 * settings.TENANT_RESOURCES_RESYNC + 30)
    call_command("watch_tenants")


def extender(args: argparse.Namespace) -> None:
    bind = args.bind or env_str("GPUCLOUD_EXTENDER_BIND", "0.0.0.0:8443")
    health_bind = args.health_bind or env_str("GPUCLOUD_EXTENDER_HEALTH_BIND", "0.0.0.0:8081")
    tls = {
        "tls_cert": args.tls_cert or env_str("GPUCLOUD_EXTENDER_TLS_CERT"),
        "tls_key": args.tls_key or env_str("GPUCLOUD_EXTENDER_TLS_KEY"),
        "tls_client_ca": args.tls_client_ca or env_str("GPUCLOUD_EXTENDER_TLS_CLIENT_CA"),
    }
    # One thread per host cluster's feed plus one per kube-scheduler connection checking tokens, at most.
    _become("extender", connections=env_int("GPUCLOUD_EXTENDER_CONNECTIONS", 8, minimum=1))
    from django.core.management import CommandError, call_command

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # serve_extender's way out: stop the feeds, close the sockets, exit 0

    signal.signal(signal.SIGTERM, interrupt)
    try:
        call_command("serve_extender", bind=bind, health_bind=health_bind, **tls)
    except CommandError as exc:
        raise ConfigError(str(exc)) from None


def gateway(args: argparse.Namespace) -> None:
    bind = args.bind or env_str("GPUCLOUD_GATEWAY_BIND", "0.0.0.0:8080")
    # Its database work (a key and endpoint read, a usage row per request) runs in a pool of this size.
    _become("gateway", connections=env_int("GPUCLOUD_GATEWAY_DB_THREADS", 8, minimum=1))
    from django.core.management import CommandError, call_command

    try:
        call_command("serve_gateway", bind=bind)  # it handles SIGTERM itself: drain, then exit 0
    except CommandError as exc:
        raise ConfigError(str(exc)) from None


def manage(args: argparse.Namespace) -> None:
    os.environ.setdefault("GPUCLOUD_PROCESS", "manage")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["gpucloud manage", *args.args])


COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], None], str]] = {
    "web": (web, "serve the portal and the API with gunicorn"),
    "worker": (worker, "run a Celery worker"),
    "scheduler": (scheduler, "run the periodic schedule (one leader among any number of schedulers)"),
    "migrate": (migrate, "apply database migrations, then exit (safe to run from several places at once)"),
    "tenant-watcher": (tenant_watcher, "apply Tenant and RateCard custom resources (--watch-tenants)"),
    "extender": (extender, "serve kube-scheduler's extender (exactly one: assumed placements are in memory)"),
    "gateway": (gateway, "serve the OpenAI API for the tenants' inference endpoints (drains on SIGTERM)"),
    "manage": (manage, "run a manage.py command"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gpucloud", description="The gpucloud control plane's processes.")
    parser.add_argument("--version", action="version", version=f"gpucloud {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text)
        if name == "web":
            sub.add_argument("--bind", help="ADDR:PORT to listen on (default: GPUCLOUD_BIND or 0.0.0.0:8000)")
        if name == "extender":
            sub.add_argument("--bind", help="ADDR:PORT (default: GPUCLOUD_EXTENDER_BIND or 0.0.0.0:8443)")
            sub.add_argument(
                "--health-bind",
                help="ADDR:PORT of a plain-HTTP /healthz (default: GPUCLOUD_EXTENDER_HEALTH_BIND, :8081)",
            )
            sub.add_argument("--tls-cert", help="PEM certificate (default: GPUCLOUD_EXTENDER_TLS_CERT)")
            sub.add_argument("--tls-key", help="its PEM key (default: GPUCLOUD_EXTENDER_TLS_KEY)")
            sub.add_argument(
                "--tls-client-ca",
                help="admit only certificates it issued (default: GPUCLOUD_EXTENDER_TLS_CLIENT_CA)",
            )
        if name == "gateway":
            sub.add_argument("--bind", help="ADDR:PORT (default: GPUCLOUD_GATEWAY_BIND or 0.0.0.0:8080)")
        if name == "manage":
            sub.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        COMMANDS[args.command][0](args)
    except ConfigError as exc:
        sys.exit(f"gpucloud {args.command}: {exc}")


if __name__ == "__main__":
    main()
