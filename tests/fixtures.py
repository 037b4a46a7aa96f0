"""Fixtures every test may use: the demo fleet, the three people of every tenancy test, API clients, a git
repository, a fresh PostgreSQL database for processes that migrate their own, a real Celery worker, the
Kubernetes emulator; and what each pytest-xdist worker keeps to itself when the suite runs in parallel."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from kubernetes import client
from rest_framework.test import APIClient

from core.audit import Actor
from fleet import fleet_file
from fleet.services import load_fleet, sync_catalog
from gitops.tests.gitrepos import Repo
from gpucloud.kube.api import api_client_for_url
from tenants.models import Tenant
from tenants.services import lifecycle, members
from tenants.tokens import create_token
from tests.kube_emulator import RunningEmulator, start_emulator
from tests.tools import server_url, with_database

SYSTEM = Actor.system("tests")
WORKER_DATABASE = pytest.StashKey[tuple[str, str]]()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist (`make test` runs `pytest -n …`) the workers run tests side by side, so what a test
    or a process it starts would share with the whole run becomes the worker's own. pytest-django gives each
    worker its test database (test_<name>_gw0, …); this gives it the rest:
    - DATABASE_URL, which the processes some tests start (`gpucloud scheduler`, the image's web) connect to
      as it is: a database <name>_gw0 of the worker's, made here and dropped when it ends;
    - the Celery broker: Redis database 15 for gw0, 14 for gw1… (of CELERY_BROKER_URL's number), so one
      worker's Celery never takes another's tasks, and a test purging its queues or RedBeat's lock and
      schedule touches its worker's alone;
    - GPUCLOUD_VAR_DIR (Git mirrors, screenshots, locks): a directory gw0/ in the run's.
    Django's settings were read before any conftest loads, so they are set here as well as the environment.
    """
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is None:
        return
    index = int(worker.removeprefix("gw"))

    database = os.environ.get("DATABASE_URL", "")
    if database.startswith("postgres"):
        parts = urlsplit(database)
        name = f"{parts.path.lstrip('/')}_{worker}"
        admin = urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        config.stash[WORKER_DATABASE] = (admin, name)
        os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path="/" + name))

    broker = os.environ.get("CELERY_BROKER_URL", "")
    if broker.startswith(("redis://", "rediss://")):
        parts = urlsplit(broker)
        number = int(parts.path.strip("/") or 0) - index
        if number < 0:
            raise pytest.UsageError(f"{worker}: no Redis database is left below {broker} for this worker")
        own = urlunsplit(parts._replace(path=f"/{number}"))
        os.environ["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL = own
        if broker == settings.CELERY_REDBEAT_REDIS_URL:
            settings.CELERY_REDBEAT_REDIS_URL = own
        from gpucloud.celery import app

        app.conf.broker_url, app.conf.redbeat_redis_url = own, settings.CELERY_REDBEAT_REDIS_URL

    var_dir = Path(settings.VAR_DIR) / worker
    var_dir.mkdir(parents=True, exist_ok=True)
    os.environ["GPUCLOUD_VAR_DIR"] = str(var_dir)
    settings.VAR_DIR = var_dir


# Under pytest-xdist: the tests of a module that share a module-scoped fixture (a built wheel, a running
# embedded default) go to one worker, so it is made once. `--dist loadgroup` cannot do it on pytest 9.2: it
# marks a group by editing the test's node id, which pytest no longer reads (pytest-dev/pytest-xdist#1386).
# So each worker writes the groups it collected to a file the controller names (GROUPS), and the controller's
# scheduler, made by pytest_xdist_make_scheduler for `--dist loadgroup`, reads them from there.
GROUPS = "gpucloud_groups"


GROUPS_DIR = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if GROUPS_DIR not in node.config.stash:
        node.config.stash[GROUPS_DIR] = Path(tempfile.mkdtemp(prefix="gpucloud-xdist-groups-"))
    node.workerinput[GROUPS] = str(node.config.stash[GROUPS_DIR])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]  # pytest-xdist ships no types
        """One work unit per group the workers wrote, one per test otherwise; units in collection order."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                written = sorted(config.stash[GROUPS_DIR].glob("*.json"))
                self.groups = json.loads(written[0].read_text()) if written else {}
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist: group the tests sharing a module-scoped fixture, and hand the slow ones out first,
    so that the run does not end waiting on a wheel build begun last. pytest-django has put the tests that
    use the database in a transaction before those that flush it (data migrations' rows are gone after a
    flush); that order stays. Only the tests without a database move: the slow ones to the front."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return  # a run in one process keeps the collection's order
    order = {item.nodeid: _order(item) for item in items}
    groups = {item.nodeid: item.nodeid.split("::")[0] for item in items if _shares_a_module_fixture(item)}
    phases: dict[str, set[int]] = {}
    for nodeid, group in groups.items():
        phases.setdefault(group, set()).add(order[nodeid][0])
    # A group goes out when its last phase does; one with tests in a transaction and tests that flush would
    # run the former after other tests' flushes, so it is not made (its module fixture is made per worker).
    groups = {nodeid: group for nodeid, group in groups.items() if not {1, 2} <= phases[group]}
    unit = {item.nodeid: groups.get(item.nodeid, item.nodeid) for item in items}
    rank: dict[str, tuple[int, int, int]] = {}
    for index, item in enumerate(items):
        phase, slow = order[item.nodeid]
        before = rank.get(unit[item.nodeid], (phase, slow, index))
        rank[unit[item.nodeid]] = (max(before[0], phase), min(before[1], slow), min(before[2], index))
    items.sort(key=lambda item: rank[unit[item.nodeid]])
    if GROUPS in workerinput:
        writing = Path(workerinput[GROUPS]) / f"{workerinput['workerid']}.writing"
        writing.write_text(json.dumps(groups))
        writing.rename(writing.with_suffix(".json"))  # whole, or not there


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    """The test uses a module-, class- or package-scoped fixture of the project's (a plugin's own, such as
    pytest-django's class-scoped one every test has, has no base id)."""
    fixtures = getattr(item, "_fixtureinfo", None)
    definitions = fixtures.name2fixturedefs.values() if fixtures else ()
    return any(d.scope in ("module", "class", "package") and d.baseid for defs in definitions for d in defs)


def _order(item: pytest.Item) -> tuple[int, int]:
    """When a test is handed out: first the slow ones without a database (a wheel or image build, a real
    process: tens of seconds to minutes); then the tests in a transaction; then those that flush the
    database, slow ones first; last the quick ones without a database, which even out the workers' ends."""
    names = set(getattr(item, "fixturenames", ()))
    django_db = item.get_closest_marker("django_db")
    if item.get_closest_marker("wheel"):
        slow = 2
    elif item.get_closest_marker("worker") or names & {"browser", "live_server", "celery_worker"}:
        slow = 1
    else:
        slow = 0
    if (django_db and django_db.kwargs.get("transaction")) or names & {"transactional_db", "live_server"}:
        return 2, -slow
    if django_db or "db" in names:
        return 1, 0
    return (0, -slow) if slow else (3, 0)


def pytest_unconfigure(config: pytest.Config) -> None:
    if GROUPS_DIR in config.stash:
        shutil.rmtree(config.stash[GROUPS_DIR], ignore_errors=True)
    if WORKER_DATABASE in config.stash:
        admin, name = config.stash[WORKER_DATABASE]
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """Passwords are hashed with a cheap hasher in tests; the real one takes a second per user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fresh_rate_limits(request: pytest.FixtureRequest) -> None:
    """Throttles and sign-in limits count in the shared cache (the database's, or Redis): every test that
    can reach it starts at zero. A test without the database has no cache to count in."""
    if "transactional_db" in request.fixturenames or "live_server" in request.fixturenames:
        request.getfixturevalue("transactional_db")
    elif "db" in request.fixturenames:
        request.getfixturevalue("db")
    elif request.node.get_closest_marker("django_db") is None:
        return
    cache.clear()


@pytest.fixture
def gpu_catalog(db: Any) -> None:
    """The GPU catalog. A data migration writes it, but transactional tests flush it; this puts it back."""
    sync_catalog()


@pytest.fixture
def demo_fleet(gpu_catalog: None) -> Any:
    """The 104-GPU demo fleet (64 × H200 141GB, 40 × A100 80GB)."""
    fleet = fleet_file.load(settings.BASE_DIR / "deploy" / "fleets" / "demo.yaml")
    return load_fleet(actor=SYSTEM, fleet=fleet, source="demo.yaml").host_cluster


@pytest.fixture
def small_fleet(demo_fleet: Any) -> Any:
    """A second simulated host cluster `small` beside the demo fleet: one node of 8 × H200 141GB."""
    group = {"name": "h200", "count": 1, "gpuModel": "h200-141gb", "gpusPerNode": 8}
    group |= {"cpuMilli": 224000, "memoryMiB": 2097152, "topology": {"zone": "zone-b", "rack": "rack-9"}}
    document = {
        "apiVersion": "gpucloud.io/v1alpha1",
        "kind": "Fleet",
        "metadata": {"name": "small"},
        "spec": {"region": "local-2", "nodeGroups": [group]},
    }
    return load_fleet(actor=SYSTEM, fleet=fleet_file.parse(document), source="small").host_cluster


@pytest.fixture
def make_user(db: Any) -> Callable[..., User]:
    def make(username: str, *, staff: bool = False) -> User:
        return User.objects.create_user(username, f"{username}@example.com", "pw-" + username, is_staff=staff)

    return make


@pytest.fixture
def admin(make_user: Callable[..., User]) -> User:
    return make_user("admin", staff=True)


@pytest.fixture
def make_tenant(admin: User, demo_fleet: Any) -> Callable[..., Tenant]:
    def make(slug: str, **kwargs: Any) -> Tenant:
        return lifecycle.create_tenant(actor=Actor.of(admin), slug=slug, **kwargs)

    return make


@pytest.fixture
def people(make_user: Callable[..., User], make_tenant: Callable[..., Tenant], admin: User) -> dict[str, Any]:
    """alice owns tenant A, bob is a viewer of A, charlie owns tenant B and must see none of A."""
    alice, bob, charlie = make_user("alice"), make_user("bob"), make_user("charlie")
    tenant_a, tenant_b = make_tenant("tenant-a"), make_tenant("tenant-b")
    as_admin = Actor.of(admin)
    members.add_member(actor=as_admin, tenant=tenant_a, username="alice", role="owner")
    members.add_member(actor=as_admin, tenant=tenant_a, username="bob", role="viewer")
    members.add_member(actor=as_admin, tenant=tenant_b, username="charlie", role="owner")
    return {"alice": alice, "bob": bob, "charlie": charlie, "a": tenant_a, "b": tenant_b, "admin": admin}


@pytest.fixture
def api() -> Callable[[User | None], APIClient]:
    """An API client signed in as `user` with a real bearer token (or anonymous for None)."""

    def client(user: User | None) -> APIClient:
        api_client = APIClient()
        if user is not None:
            _, token = create_token(actor=SYSTEM, user=user, name="test", scope="admin")
            api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return api_client

    return client


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """A git repository `platform` the test commits to (gitops/tests/gitrepos.py), served over file://."""
    return Repo(tmp_path / "platform")


@pytest.fixture
def fresh_database() -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database, dropped afterwards."""
    name = f"gpc_cli_{uuid.uuid4().hex[:10]}"
    admin = with_database(server_url(), "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield with_database(server_url(), name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def celery_worker(transactional_db: Any) -> Iterator[Any]:
    """A real Celery worker on the Redis broker, in this process, consuming every gpucloud queue."""
    from celery.contrib.testing.worker import start_worker

    from gpucloud.celery import app

    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.fail("worker tests need CELERY_BROKER_URL=redis://… (make test sets it)")
    with app.connection_for_write() as conn:
        for queue in ("reconcile", "default"):
            conn.default_channel.queue_purge(queue)  # nothing left over from other runs
    with start_worker(
        app, pool="solo", perform_ping_check=False, queues=["reconcile", "default"], shutdown_timeout=10
    ) as worker:
        yield worker


@pytest.fixture
def migrate(transactional_db: Any) -> Iterator[Callable[[tuple[str, str]], Any]]:
    """`migrate((app, name))` moves the real database to that migration and returns the app registry as it was
    then; afterwards every app is migrated back to its newest migration."""

    def to(target: tuple[str, str]) -> Any:
        executor = MigrationExecutor(connection)
        executor.migrate([target])
        return executor.loader.project_state([target]).apps

    yield to
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


ALL_CRDS = ("kueue", "kai", "flux", "vcluster-platform", "cilium", "gpu-operator")


@pytest.fixture
def kube_emulator() -> Iterator[RunningEmulator]:
    """An emulated API server on loopback serving every add-on's CRDs; `.url` is its address."""
    emulator = start_emulator(crds=ALL_CRDS)
    yield emulator
    emulator.stop()


@pytest.fixture
def kube_client(kube_emulator: RunningEmulator) -> Iterator[client.ApiClient]:
    """An official `kubernetes.client.ApiClient` pointed at the emulator."""
    api_client = api_client_for_url(kube_emulator.url)
    yield api_client
    api_client.close()
