"""Tenant and RateCard custom resources (issue 13 §3) on the Kubernetes API stand-in, through the real client:
the committed CRDs installed, a host cluster registered with --watch-tenants, `gitops.controller` applying
what is declared there and writing status, finalizers, watches resumed and relisted after 410 Gone."""

from __future__ import annotations

import io
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from billing.models import RateCard
from clusters.reconcile import tenants as reconcile
from clusters.registration import register_host_cluster
from clusters.tests.conftest import kubeconfig_for
from core.audit import Actor
from core.models import AuditEvent
from fleet.models import HostCluster
from gitops.apply import apply
from gitops.controller import FINALIZER, KINDS, Controller
from gitops.crds import CRD_DIR
from gitops.manifests import from_bodies
from gitops.models import ManagedObject
from gpucloud.errors import ValidationFailed
from gpucloud.kube.api import Gone
from gpucloud.kube.kinds import RATE_CARD_RESOURCE, TENANT_RESOURCE
from gpucloud.tests.test_cli import (
    gpucloud,
    healthz,
    process_env,
    stop,
    wait_until,
)
from tenants.models import Quota, Tenant
from tests.kube_emulator import RunningEmulator, start_emulator
from tests.tools import free_port, unavailable

GROUP = "gpucloud.io/v1alpha1"
NS = "tenants"
CONSOLE = Actor.console("test")
ACTOR_LABEL = "system:kubernetes:gpu-east/tenants"


def tenant_cr(name: str = "vision", **spec: Any) -> dict[str, Any]:
    body = {
        "displayName": "Vision Team",
        "hostCluster": "demo",
        "members": [{"user": "alice", "role": "owner"}],
        "quotas": [{"gpuClass": "h200-141gb", "guaranteed": 8, "burst": 8}],
        **spec,
    }
    return {"apiVersion": GROUP, "kind": "Tenant", "metadata": {"name": name, "namespace": NS}, "spec": body}


@pytest.fixture
def emulator() -> Iterator[RunningEmulator]:
    """The API stand-in with Kueue and Flux, the committed gpucloud CRDs installed, and the namespace."""
    running = start_emulator(crds=("kueue", "flux"))
    for path in sorted(CRD_DIR.glob("*.gpucloud.io.yaml")):
        running.put_object(yaml.safe_load(path.read_text()))
    running.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    yield running
    running.stop()


@pytest.fixture
def instant(settings):
    settings.SIMULATED_PROVISION_DELAY = 0
    settings.SIMULATED_DELETE_DELAY = 0


@pytest.fixture
def watching(emulator, demo_fleet, make_user, instant) -> HostCluster:
    """`gpu-east`, registered with --watch-tenants tenants; the tenants run on the simulated demo fleet."""
    make_user("alice")
    call_command(
        "add_host_cluster",
        "gpu-east",
        "--kubeconfig",
        str(_kubeconfig_file(emulator)),
        "--scheduler",
        "kueue",
        "--watch-tenants",
        NS,
    )
    return HostCluster.objects.get(name="gpu-east")


def _kubeconfig_file(emulator: RunningEmulator) -> Path:
    path = Path(tempfile.mkdtemp()) / "kubeconfig"
    path.write_text(kubeconfig_for(emulator.url))
    return path


@pytest.fixture
def controller(watching) -> Controller:
    return Controller(watching, resync_seconds=60, watch_seconds=2)


def cr(emulator: RunningEmulator, name: str = "vision", kind: str = "Tenant") -> Any:
    return emulator.get_object(GROUP, kind, name, NS)


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj["status"]["conditions"]}


def test_registering_with_watch_tenants_needs_the_crds(demo_fleet):
    with (
        start_emulator(crds=("kueue", "flux")) as bare,
        pytest.raises(ValidationFailed, match="install the CRDs first"),
    ):
        register_host_cluster(
            actor=CONSOLE,
            name="gpu-west",
            kubeconfig=kubeconfig_for(bare.url),
            scheduler="kueue",
            watch_tenants=NS,
        )
    assert not HostCluster.objects.filter(name="gpu-west").exists()


def test_a_tenant_resource_becomes_a_ready_tenant_with_its_quotas(watching, controller, emulator, demo_fleet):
    assert watching.tenants_namespace == NS
    emulator.put_object(tenant_cr())

    controller.sync(TENANT_RESOURCE)

    tenant = Tenant.objects.get(slug="vision")
    assert tenant.display_name == "Vision Team"
    assert tenant.cluster.host_cluster == demo_fleet
    quota = Quota.objects.get(tenant=tenant)
    assert (quota.gpu_class.name, quota.guaranteed, quota.burst) == ("h200-141gb", 8, 8)
    assert list(tenant.memberships.values_list("user__username", "role")) == [("alice", "owner")]
    obj = cr(emulator)
    assert obj["metadata"]["finalizers"] == [FINALIZER]
    found = conditions(obj)
    assert (found["Ready"]["status"], found["Ready"]["reason"]) == ("False", "Provisioning")
    assert found["Reconciling"]["status"] == "True"
    assert "Stalled" not in found
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 1
    assert obj["status"]["tenantId"] == tenant.public_id

    reconcile.reconcile_host_cluster(demo_fleet)  # the simulated fleet provisions the tenant cluster
    controller.sync(TENANT_RESOURCE)

    obj = cr(emulator)
    ready = conditions(obj)["Ready"]
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("True", "Ready", 1)
    assert set(conditions(obj)) == {"Ready"}  # kstatus: Reconciling and Stalled only while true
    assert obj["status"]["state"] == "ready"

    # The audit log names the door: the host cluster and namespace, and the object's own source.
    assert AuditEvent.objects.get(action="tenant.create").actor_label == ACTOR_LABEL
    applied = AuditEvent.objects.get(action="manifests.apply")
    assert applied.object_id == "kubernetes:gpu-east/tenants/Tenant/vision"
    assert ManagedObject.objects.get(kind="Tenant", name="vision").revision == "generation 1"

    writes = emulator.writes
    events = AuditEvent.objects.count()
    controller.sync(TENANT_RESOURCE)
    assert (emulator.writes, AuditEvent.objects.count()) == (writes, events)  # unchanged costs nothing


def argo_health(obj: dict[str, Any]) -> tuple[str, str]:
    """Argo CD's health of `obj` by the Lua check docs/gitops.md tells to install (run by real Lua)."""
    try:
        from lupa import LuaRuntime
    except ImportError:
        unavailable("lupa is not installed (a dev dependency: pip install -e '.[dev]')")
    lua = LuaRuntime()
    check = lua.eval(f"function(obj) {(CRD_DIR / 'argocd-health.lua').read_text()} end")
    health = check(lua.table_from(obj, recursive=True))
    return str(health["status"]), str(health["message"])


def test_argo_cd_health_follows_the_tenant_from_creation_to_deletion(
    watching, controller, emulator, demo_fleet
):
    emulator.put_object(tenant_cr())
    assert argo_health(cr(emulator))[0] == "Progressing"  # gpucloud has not seen it yet
    controller.sync(TENANT_RESOURCE)
    assert argo_health(cr(emulator)) == ("Progressing", "tenant vision is pending")
    reconcile.reconcile_host_cluster(demo_fleet)
    controller.sync(TENANT_RESOURCE)
    assert argo_health(cr(emulator)) == ("Healthy", "tenant vision is ready with 1 quotas")

    too_much = {"spec": {"quotas": [{"gpuClass": "h200-141gb", "guaranteed": 5000}]}}
    emulator.edit_object(GROUP, "Tenant", "vision", NS, too_much)
    assert argo_health(cr(emulator))[0] == "Progressing"  # generation 2 not observed yet
    controller.sync(TENANT_RESOURCE)
    status, message = argo_health(cr(emulator))
    assert status == "Degraded"
    assert "spec.quotas[0]" in message
    assert "capacity" in message

    emulator.edit_object(GROUP, "Tenant", "vision", NS, {"spec": {"quotas": []}})
    controller.sync(TENANT_RESOURCE)
    assert argo_health(cr(emulator))[0] == "Healthy"
    emulator.remove_object(GROUP, "Tenant", "vision", NS)
    controller.sync(TENANT_RESOURCE)
    assert argo_health(cr(emulator)) == ("Progressing", "being deleted")


def test_a_spec_change_arrives_by_watch_and_is_applied(watching, controller, emulator):
    emulator.put_object(tenant_cr())
    version = controller.sync(TENANT_RESOURCE)
    emulator.edit_object(
        GROUP,
        "Tenant",
        "vision",
        NS,
        {
            "spec": {
                "displayName": "Vision",
                "quotas": [{"gpuClass": "h200-141gb", "guaranteed": 4}],
                "sleep": {"whenIdle": True, "afterInactivity": "2h"},
            }
        },
    )

    controller.follow(TENANT_RESOURCE, version, timeout_seconds=1)

    tenant = Tenant.objects.get(slug="vision")
    assert tenant.display_name == "Vision"
    assert (tenant.sleep_when_idle, tenant.sleep_after_inactivity) == (True, "2h")
    assert Quota.objects.get(tenant=tenant).guaranteed == 4
    obj = cr(emulator)
    assert obj["metadata"]["generation"] == 2
    assert obj["status"]["observedGeneration"] == 2
    assert conditions(obj)["Ready"]["observedGeneration"] == 2


@pytest.mark.parametrize(
    ("spec", "reason", "words"),
    [
        ({"members": [{"user": "not a user!", "role": "owner"}]}, "InvalidSpec", "neither a username nor"),
        ({"members": [{"user": "nobody", "role": "owner"}]}, "InvalidSpec", "there is no user called"),
        ({"quotas": [{"gpuClass": "h200-141gb", "guaranteed": 5000}]}, "Refused", "capacity"),
        ({"colour": "blue"}, "InvalidSpec", "'colour' is not a field of Tenant"),
        ({"sleep": {"afterInactivity": "30s"}}, "InvalidSpec", "'30s' is not a delay of at least a minute"),
    ],
)
def test_a_spec_that_cannot_be_applied_is_a_false_condition_and_writes_nothing(
    watching, controller, emulator, spec, reason, words
):
    body = tenant_cr()
    body["spec"].update(spec)
    emulator.put_object(body)

    controller.sync(TENANT_RESOURCE)

    assert not Tenant.objects.filter(slug="vision").exists()
    assert not AuditEvent.objects.filter(actor_label=ACTOR_LABEL).exists()
    found = conditions(cr(emulator))
    assert (found["Ready"]["status"], found["Ready"]["reason"]) == ("False", reason)
    assert found["Stalled"]["status"] == "True"
    assert words in found["Stalled"]["message"]


def test_a_bad_change_to_a_live_tenant_changes_none_of_it(watching, controller, emulator):
    emulator.put_object(tenant_cr())
    controller.sync(TENANT_RESOURCE)
    emulator.edit_object(
        GROUP,
        "Tenant",
        "vision",
        NS,
        {"spec": {"displayName": "Renamed", "quotas": [{"gpuClass": "h200-141gb", "guaranteed": 5000}]}},
    )

    controller.sync(TENANT_RESOURCE)

    tenant = Tenant.objects.get(slug="vision")
    assert tenant.display_name == "Vision Team"
    assert Quota.objects.get(tenant=tenant).guaranteed == 8
    obj = cr(emulator)
    assert conditions(obj)["Stalled"]["reason"] == "Refused"
    assert obj["status"]["observedGeneration"] == 2


def test_deleting_the_resource_deletes_the_tenant_before_the_finalizer_goes(
    watching, controller, emulator, demo_fleet
):
    emulator.put_object(tenant_cr())
    controller.sync(TENANT_RESOURCE)
    reconcile.reconcile_host_cluster(demo_fleet)

    emulator.remove_object(GROUP, "Tenant", "vision", NS)
    assert cr(emulator)["metadata"]["deletionTimestamp"]  # the finalizer holds it
    controller.sync(TENANT_RESOURCE)

    assert Tenant.objects.get(slug="vision").state == "deleting"
    held = cr(emulator)
    assert held["metadata"]["finalizers"] == [FINALIZER]
    assert conditions(held)["Ready"]["reason"] == "Deleting"
    assert AuditEvent.objects.get(action="tenant.delete").actor_label == ACTOR_LABEL

    reconcile.reconcile_host_cluster(demo_fleet)  # the tenant cluster is torn down
    assert Tenant.objects.get(slug="vision").state == "deleted"
    controller.sync(TENANT_RESOURCE)

    assert cr(emulator) is None  # finalizer removed: the API server completed the deletion
    assert not ManagedObject.objects.filter(name="vision").exists()


def test_a_resource_whose_finalizer_was_removed_by_hand_still_deletes_its_tenant(
    watching, controller, emulator
):
    emulator.put_object(tenant_cr())
    version = controller.sync(TENANT_RESOURCE)
    emulator.remove_object(GROUP, "Tenant", "vision", NS)
    emulator.edit_object(GROUP, "Tenant", "vision", NS, {"metadata": {"finalizers": None}})  # kubectl patch
    assert cr(emulator) is None

    controller.follow(TENANT_RESOURCE, version, timeout_seconds=1)

    assert Tenant.objects.get(slug="vision").state == "deleting"
    assert not ManagedObject.objects.filter(name="vision").exists()


def test_a_tenant_owned_by_another_source_is_refused_and_its_deletion_leaves_the_tenant(
    watching, controller, emulator
):
    gitops_tenant = {k: v for k, v in tenant_cr().items() if k != "metadata"} | {
        "metadata": {"name": "vision"}
    }
    apply(from_bodies([gitops_tenant]), actor=CONSOLE, source="gitops:platform")
    emulator.put_object(tenant_cr(displayName="Mine"))

    controller.sync(TENANT_RESOURCE)
    assert "managed by gitops:platform" in conditions(cr(emulator))["Stalled"]["message"]

    emulator.remove_object(GROUP, "Tenant", "vision", NS)
    controller.sync(TENANT_RESOURCE)
    assert cr(emulator) is None
    assert Tenant.objects.get(slug="vision").state == "pending"  # not ours to delete


def test_a_rate_card_resource_is_applied_and_withdrawn_when_deleted(watching, controller, emulator):
    card = {
        "apiVersion": GROUP,
        "kind": "RateCard",
        "metadata": {"name": "list-2027", "namespace": NS},
        "spec": {
            "effectiveFrom": "2027-01-01T00:00:00Z",
            "currency": "USD",
            "prices": {"h200-141gb": "3.10"},
        },
    }
    emulator.put_object(card)

    controller.sync(RATE_CARD_RESOURCE)

    assert RateCard.objects.get(name="list-2027").currency == "USD"
    ready = conditions(cr(emulator, "list-2027", "RateCard"))["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "Applied")

    emulator.remove_object(GROUP, "RateCard", "list-2027", NS)
    controller.sync(RATE_CARD_RESOURCE)
    assert cr(emulator, "list-2027", "RateCard") is None
    assert not RateCard.objects.filter(name="list-2027").exists()  # no issued invoice used it: deleted
    assert not ManagedObject.objects.filter(kind="RateCard").exists()


def test_a_watch_from_a_compacted_version_is_gone(watching, controller, emulator):
    version = controller.sync(TENANT_RESOURCE)
    emulator.put_object(tenant_cr())
    emulator.compact()
    with pytest.raises(Gone):
        controller.follow(TENANT_RESOURCE, version, timeout_seconds=1)


def wait_for(check: Callable[[], Any], seconds: float = 15) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {seconds} s")


@pytest.mark.django_db(transaction=True)
def test_the_loop_resumes_cut_watches_and_lists_again_after_410(emulator, demo_fleet, make_user, instant):
    make_user("alice")
    host = register_host_cluster(
        actor=CONSOLE,
        name="gpu-east",
        kubeconfig=kubeconfig_for(emulator.url),
        scheduler="kueue",
        watch_tenants=NS,
    )
    controller = Controller(host, resync_seconds=600, watch_seconds=30)
    stop = threading.Event()
    threads = [threading.Thread(target=controller.run, args=(kind, stop)) for kind in KINDS]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: emulator.open_watches() == 2)
        emulator.put_object(tenant_cr("first"))
        wait_for(lambda: Tenant.objects.filter(slug="first").exists())

        # The connection is cut: the watch resumes from the last version it saw, without listing.
        lists = sum(1 for m, p, _ in emulator.log if m == "GET" and p.endswith("/tenants"))
        seen = cr(emulator, "first")["metadata"]["resourceVersion"]
        emulator.drop_watches()
        wait_for(lambda: emulator.open_watches() == 2)
        emulator.put_object(tenant_cr("second"))
        wait_for(lambda: Tenant.objects.filter(slug="second").exists())
        resumed = [q for q in emulator.watch_log if q["path"].endswith("/tenants")]
        assert int(resumed[-1]["resourceVersion"]) >= int(seen)
        assert sum(1 for m, p, _ in emulator.log if m == "GET" and p.endswith("/tenants")) == lists

        # History compacted while it was away: 410 Gone, so it lists again and misses nothing.
        emulator.compact()
        emulator.drop_watches()
        wait_for(lambda: sum(1 for m, p, _ in emulator.log if m == "GET" and p.endswith("/tenants")) > lists)
        emulator.put_object(tenant_cr("third"))
        wait_for(lambda: Tenant.objects.filter(slug="third").exists())
        ready = wait_for(lambda: (cr(emulator, "third") or {}).get("status"))
        assert conditions({"status": ready})["Ready"]["reason"] == "Provisioning"
    finally:
        stop.set()
        emulator.drop_watches()
        for thread in threads:
            thread.join(timeout=15)
    assert not any(thread.is_alive() for thread in threads)
    assert not [request for request in emulator.log if request[2] == 409]  # no write raced another
    assert {e.actor_label for e in AuditEvent.objects.filter(action="tenant.create")} == {ACTOR_LABEL}


def test_watch_tenants_once_applies_every_watching_cluster(watching, emulator):
    emulator.put_object(tenant_cr())
    out = io.StringIO()
    call_command("watch_tenants", "--once", stdout=out)
    assert "gpu-east: namespace tenants applied" in out.getvalue()
    assert Tenant.objects.filter(slug="vision").exists()
    with pytest.raises(CommandError, match="no host cluster watches tenants called: gpu-west"):
        call_command("watch_tenants", "--once", "--host-cluster", "gpu-west")
    emulator.stop()  # the cluster is away: said, not a traceback
    with pytest.raises(CommandError, match="could not read the custom resources of: gpu-east"):
        call_command("watch_tenants", "--once", stderr=io.StringIO())


def test_the_api_registers_a_host_cluster_that_watches_tenants(emulator, api, admin, gpu_catalog):
    registration = {
        "name": "gpu-east",
        "kubeconfig": kubeconfig_for(emulator.url),
        "scheduler": "kueue",
        "watch_tenants": NS,
    }
    response = api(admin).post("/api/v1/host-clusters/", registration, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["tenants_namespace"] == NS
    bad = api(admin).post(
        "/api/v1/host-clusters/",
        {**registration, "name": "gpu-west", "watch_tenants": "Not_A_NS"},
        format="json",
    )
    assert bad.status_code == 400
    assert "not a namespace name" in bad.json()["errors"]["watch_tenants"][0]


@pytest.mark.worker
def test_the_tenant_watcher_process_applies_resources_and_stops_on_sigterm(
    emulator,
    fresh_database,
    tmp_path,
):
    health = free_port()
    env = process_env(
        DATABASE_URL=fresh_database, GPUCLOUD_TENANT_RESOURCES_RESYNC="2", GPUCLOUD_HEALTH_PORT=str(health)
    )
    assert gpucloud("migrate", env=env, out=tmp_path / "migrate.log").wait(timeout=300) == 0
    kubeconfig = _kubeconfig_file(emulator)
    register = [
        "manage",
        "add_host_cluster",
        "gpu-east",
        "--kubeconfig",
        str(kubeconfig),
        "--scheduler",
        "kueue",
    ]
    added = gpucloud(*register, "--watch-tenants", NS, env=env, out=tmp_path / "add.log")
    assert added.wait(timeout=120) == 0, (tmp_path / "add.log").read_text()
    body = tenant_cr(hostCluster="gpu-east", members=[], quotas=[])
    emulator.put_object(body)

    watcher = gpucloud("tenant-watcher", env=env, out=tmp_path / "watcher.log")
    try:
        wait_until(lambda: (cr(emulator) or {}).get("status"), 60, "the resource's status")
        assert conditions(cr(emulator))["Ready"]["reason"] == "Provisioning"
        with psycopg.connect(fresh_database) as conn:
            row = conn.execute("SELECT state FROM tenants_tenant WHERE slug = 'vision'").fetchone()
        assert row == ("pending",)
        status, beat = healthz(health)  # the kubelet's liveness probe: its loop comes round every resync
        assert status == 200
        assert beat["seconds_since_beat"] <= 2.5
        assert beat["max"] == 2 * 2 + 30
    finally:
        code = stop(watcher, timeout=30)
    assert code == 0, (tmp_path / "watcher.log").read_text()
