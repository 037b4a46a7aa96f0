"""Fixtures every test may use: the demo fleet, the three people of every tenancy test, API clients, a git
repository, a fresh PostgreSQL database for processes that migrate their own, and a real Celery worker."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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
