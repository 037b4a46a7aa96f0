"""The kubernetes driver against the emulated API server, through the official client (no mocks)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import pytest
import yaml

from clusters.drivers.kubernetes import KubernetesDriver, PartialReconcile
from clusters.render import ClusterProfile
from clusters.spec import ReconcileResult
from clusters.tests.conftest import make_tenant, quota
from gpucloud.kube.api import RetryPolicy, api_client_for_url, api_client_from_kubeconfig
from gpucloud.kube.errors import PermanentDriverError, TemporaryDriverError
from tests.kube_emulator import Faults, RunningEmulator, start_emulator

KUEUE = "kueue.x-k8s.io/v1beta2"
FAST = RetryPolicy(attempts=6, base_seconds=0.001, cap_seconds=0.01, timeout_seconds=0.3)


def snapshot(em: RunningEmulator) -> dict[tuple[str, str | None, str], str]:
    """Every object in the emulator by (kind, namespace, name) → resourceVersion."""

    def read() -> dict[tuple[str, str | None, str], str]:
        return {
            (obj["kind"], ns, name): obj["metadata"]["resourceVersion"]
            for objects in em.emulator.store.values()
            for (ns, name), obj in objects.items()
            if obj["kind"] != "CustomResourceDefinition"
        }

    return em.call(read)


def owned_by(em: RunningEmulator, slug: str) -> set[tuple[str, str | None, str]]:
    def read() -> set[tuple[str, str | None, str]]:
        return {
            (obj["kind"], ns, name)
            for objects in em.emulator.store.values()
            for (ns, name), obj in objects.items()
            if (obj["metadata"].get("labels") or {}).get("gpucloud.io/tenant") == slug
        }

    return em.call(read)


def test_a_tenant_with_two_quotas_gets_its_namespace_vcluster_and_kueue_queues(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    result = driver.reconcile([make_tenant()], complete=True)

    assert result.errors == {}
    assert result.observations["acme"].phase == "provisioning"
    # Objects the lists did not show are read before the apply, except inside a namespace found absent.
    reads = [path for method, path, _ in kube_emulator.log if method == "GET" and "/tenant-acme" in path]
    assert reads == [
        "/api/v1/namespaces/tenant-acme",
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/tenant-acme",
    ]
    get = kube_emulator.get_object
    ns = get("v1", "Namespace", "tenant-acme")
    assert ns["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpucloud"
    rq = get("v1", "ResourceQuota", "gpucloud-gpu-quota", "tenant-acme")
    assert rq["spec"]["hard"] == {"requests.nvidia.com/gpu": "6", "requests.nvidia.com/mig-1g.18gb": "7"}
    assert get("v1", "LimitRange", "gpucloud-defaults", "tenant-acme")
    assert get("networking.k8s.io/v1", "NetworkPolicy", "gpucloud-deny-other-tenants", "tenant-acme")
    release = get("helm.toolkit.fluxcd.io/v2", "HelmRelease", "acme", "tenant-acme")
    assert release["spec"]["chart"]["spec"]["chart"] == "vcluster"
    assert release["spec"]["values"]["exportKubeConfig"]["server"] == "https://acme.vc.example.com"
    cq = get(KUEUE, "ClusterQueue", "tenant-acme")
    assert cq["spec"]["cohortName"] == "gpucloud-standard"
    flavors = {f["name"]: f["resources"][0] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]}
    assert flavors["h200-141gb"] == {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "2"}
    assert flavors["h200-141gb.mig-1g.18gb"]["lendingLimit"] == "3"
    assert get(KUEUE, "LocalQueue", "default", "tenant-acme")["spec"]["clusterQueue"] == "tenant-acme"
    assert get(KUEUE, "ResourceFlavor", "h200-141gb")
    assert get(KUEUE, "ResourceFlavor", "h200-141gb.mig-1g.18gb")
    assert (
        get(KUEUE, "Cohort", "gpucloud-standard")["metadata"]["labels"]["gpucloud.io/tenant"]
        == "gpucloud.shared"
    )


def test_the_tenant_is_ready_once_its_vcluster_is(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    driver.reconcile([make_tenant()], complete=True)
    assert kube_emulator.make_vcluster_ready("tenant-acme", "acme")

    observation = driver.reconcile([make_tenant()], complete=True).observations["acme"]

    assert (observation.phase, observation.endpoint) == ("ready", "https://acme.vc.example.com")


def test_the_kai_variant_renders_parent_and_leaf_queues_instead(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile(scheduler="kai"))
    result = driver.reconcile([make_tenant()], complete=True)

    assert result.errors == {}
    leaf = kube_emulator.get_object("scheduling.run.ai/v2", "Queue", "tenant-acme")
    assert leaf["spec"]["parentQueue"] == "gpucloud-standard"
    # 4 (+2) whole H200s and 7 MIG 1g slices, which KAI charges one GPU each.
    assert leaf["spec"]["resources"]["gpu"] == {"quota": 11, "overQuotaWeight": 1, "limit": 13}
    assert kube_emulator.get_object("scheduling.run.ai/v2", "Queue", "gpucloud-standard")
    assert kube_emulator.objects_of(KUEUE, "ClusterQueue") == []
    release = kube_emulator.get_object("helm.toolkit.fluxcd.io/v2", "HelmRelease", "acme", "tenant-acme")
    assert release["spec"]["values"]["experimental"]["syncSettings"]["setOwner"] is False


def test_a_second_pass_over_an_unchanged_cluster_lists_once_per_kind_and_writes_nothing(
    kube_emulator, kube_client
):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    tenants = [make_tenant("a"), make_tenant("b")]
    driver.reconcile(tenants, complete=True)
    before = snapshot(kube_emulator)
    kube_emulator.reset_counters()

    result = driver.reconcile(tenants, complete=True)

    assert (result.writes, result.drift_repaired) == (0, 0)
    assert result.api_calls == len(driver.kinds) + 1 == kube_emulator.calls  # + Kueue's Workloads
    assert kube_emulator.writes == 0
    assert snapshot(kube_emulator) == before


def test_changing_a_quota_rewrites_only_the_objects_it_affects(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    driver.reconcile([make_tenant("a"), make_tenant("b")], complete=True)
    before = snapshot(kube_emulator)

    changed = make_tenant("a", quotas=(quota(guaranteed=8), make_tenant().quotas[1]))
    result = driver.reconcile([changed, make_tenant("b")], complete=True)

    after = snapshot(kube_emulator)
    rewritten = {key for key in after if after[key] != before.get(key)}
    assert rewritten == {
        ("ResourceQuota", "tenant-a", "gpucloud-gpu-quota"),
        ("ClusterQueue", None, "tenant-a"),
    }
    assert result.writes == 2
    assert result.drift_repaired == 0
    assert kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-a")["metadata"]["generation"] == 2


def test_deleting_a_tenant_removes_what_it_owned_and_nothing_else(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    only_a = quota("l40s", node_labels=(("nvidia.com/gpu.product", "NVIDIA-L40S"),))
    a, b = make_tenant("a", quotas=(quota(), only_a)), make_tenant("b")
    driver.reconcile([a, b], complete=True)
    foreign: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "notes", "namespace": "ops"}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "team-x"}, "spec": {}},
        # managed-by gpucloud but no tenant label: not provably ours, so never deleted.
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "spec": {},
            "metadata": {"name": "half-labelled", "labels": {"app.kubernetes.io/managed-by": "gpucloud"}},
        },
    ]
    for obj in foreign:
        kube_emulator.put_object(obj)
    b_objects = owned_by(kube_emulator, "b")

    gone = dataclasses.replace(a, desired="absent")
    first = driver.reconcile([gone, b], complete=True)
    assert first.observations["a"].phase == "deleting"
    assert kube_emulator.get_object("v1", "Namespace", "tenant-a")["status"]["phase"] == "Terminating"
    assert kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-a") is None
    assert kube_emulator.finish_namespace_deletions() == 1

    second = driver.reconcile([gone, b], complete=True)

    assert second.observations["a"].phase == "absent"
    assert second.writes == 0
    assert owned_by(kube_emulator, "a") == set()
    assert owned_by(kube_emulator, "b") == b_objects
    for obj in foreign:
        meta = obj["metadata"]
        assert kube_emulator.get_object(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
    assert kube_emulator.get_object(KUEUE, "ResourceFlavor", "l40s") is None  # only a needed it
    assert kube_emulator.get_object(KUEUE, "ResourceFlavor", "h200-141gb")  # b still does


def test_a_tenant_recreated_while_its_namespace_terminates_waits_for_it(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    driver.reconcile([make_tenant()], complete=True)
    driver.reconcile([make_tenant(desired="absent")], complete=True)

    waiting = driver.reconcile([make_tenant()], complete=True)

    assert waiting.observations["acme"].phase == "provisioning"
    assert "terminating" in waiting.observations["acme"].message
    assert kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-acme") is None
    kube_emulator.finish_namespace_deletions()
    assert driver.reconcile([make_tenant()], complete=True).errors == {}
    assert kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-acme")


def test_cilium_clusters_get_a_cilium_network_policy_too(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile(cilium=True))

    driver.reconcile([make_tenant()], complete=True)

    policy = kube_emulator.get_object(
        "cilium.io/v2", "CiliumNetworkPolicy", "gpucloud-deny-other-tenants", "tenant-acme"
    )
    assert policy["spec"]["ingressDeny"]


def test_a_partial_pass_touches_only_the_named_tenants(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    driver.reconcile([make_tenant("a"), make_tenant("b", quotas=(quota("b200"),))], complete=True)
    before = snapshot(kube_emulator)

    result = driver.reconcile([make_tenant("a", desired="absent")], complete=False)

    assert result.observations["a"].phase == "deleting"
    assert owned_by(kube_emulator, "b")
    assert kube_emulator.get_object(
        KUEUE, "ResourceFlavor", "b200"
    )  # shared objects wait for a complete pass
    assert all(
        before[key] == version for key, version in snapshot(kube_emulator).items() if "tenant-b" in key
    )


def test_objects_deleted_or_edited_by_hand_are_restored_and_counted(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    driver.reconcile([make_tenant()], complete=True)
    kube_emulator.remove_object(KUEUE, "ClusterQueue", "tenant-acme")
    kube_emulator.edit_object(
        "v1",
        "ResourceQuota",
        "gpucloud-gpu-quota",
        "tenant-acme",
        {"spec": {"hard": {"requests.nvidia.com/gpu": "100"}}},
    )
    kube_emulator.edit_object(
        "networking.k8s.io/v1",
        "NetworkPolicy",
        "gpucloud-deny-other-tenants",
        "tenant-acme",
        {"metadata": {"labels": {"gpucloud.io/tenant": None}}},
    )

    result = driver.reconcile([make_tenant()], complete=True)

    assert (result.drift_repaired, result.writes) == (3, 3)
    assert (
        kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-acme")["spec"]["cohortName"]
        == "gpucloud-standard"
    )
    rq = kube_emulator.get_object("v1", "ResourceQuota", "gpucloud-gpu-quota", "tenant-acme")
    assert rq["spec"]["hard"]["requests.nvidia.com/gpu"] == "6"
    assert driver.reconcile([make_tenant()], complete=True).writes == 0


def test_a_pod_security_label_removed_and_an_egress_policy_deleted_by_hand_are_restored(
    kube_emulator, kube_client
):
    tenant = make_tenant(trust_tier="isolated")
    driver = KubernetesDriver(kube_client, ClusterProfile(cilium=True))
    driver.reconcile([tenant], complete=True)
    enforce = "pod-security.kubernetes.io/enforce"
    patch = {"metadata": {"labels": {enforce: "privileged"}}}
    kube_emulator.edit_object("v1", "Namespace", "tenant-acme", None, patch)
    kube_emulator.remove_object("networking.k8s.io/v1", "NetworkPolicy", "gpucloud-egress", "tenant-acme")
    kube_emulator.remove_object("cilium.io/v2", "CiliumNetworkPolicy", "gpucloud-deny-host", "tenant-acme")

    result = driver.reconcile([tenant], complete=True)

    assert result.drift_repaired == 3
    labels = kube_emulator.get_object("v1", "Namespace", "tenant-acme")["metadata"]["labels"]
    assert labels[enforce] == "restricted"
    egress = kube_emulator.get_object(
        "networking.k8s.io/v1", "NetworkPolicy", "gpucloud-egress", "tenant-acme"
    )
    assert egress["spec"]["policyTypes"] == ["Egress"]
    assert kube_emulator.get_object(
        "cilium.io/v2", "CiliumNetworkPolicy", "gpucloud-deny-host", "tenant-acme"
    )
    assert driver.reconcile([tenant], complete=True).writes == 0


def test_an_object_of_someone_else_in_the_way_is_a_visible_error_and_left_alone(kube_emulator, kube_client):
    stranger = {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "tenant-acme"},
        "spec": {"x": 1},
    }
    kube_emulator.put_object(stranger)
    driver = KubernetesDriver(kube_client, ClusterProfile())

    result = driver.reconcile([make_tenant()], complete=True)

    assert "ClusterQueue tenant-acme: already exists and is not managed by gpucloud" in result.errors["acme"]
    assert result.observations["acme"].phase == "failed"
    assert kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-acme")["spec"] == {"x": 1}


def test_a_create_that_timed_out_but_took_effect_is_applied_again_not_duplicated():
    faults = Faults(share=1.0, kinds=("timeout",), methods=frozenset({"PATCH"}), limit=1, hang_seconds=0.5)
    with start_emulator(crds=("kueue", "flux"), faults=faults) as em:
        driver = KubernetesDriver(api_client_for_url(em.url), ClusterProfile(), retry=FAST)

        result = driver.reconcile([make_tenant()], complete=True)

        assert result.errors == {}
        assert em.emulator.injected["timeout"] == 1
        # Read (absent), apply (created, but the answer never came), apply again (unchanged).
        log = em.emulator.log
        first = next(i for i, (method, _, _) in enumerate(log) if method == "PATCH")
        assert [(m, status) for m, _, status in log[first - 1 : first + 2]] == [
            ("GET", 404),
            ("PATCH", 201),
            ("PATCH", 200),
        ]
        assert len({path for _, path, _ in log[first - 1 : first + 2]}) == 1
        assert driver.reconcile([make_tenant()], complete=True).writes == 0


def test_suspending_holds_the_queues_and_puts_the_vcluster_to_sleep(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    driver.reconcile([make_tenant()], complete=True)

    result = driver.reconcile([make_tenant(desired="suspended")], complete=True)

    assert result.observations["acme"].phase == "suspended"
    assert kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-acme")["spec"]["stopPolicy"] == "Hold"
    assert (
        kube_emulator.get_object(KUEUE, "LocalQueue", "default", "tenant-acme")["spec"]["stopPolicy"]
        == "Hold"
    )
    release = kube_emulator.get_object("helm.toolkit.fluxcd.io/v2", "HelmRelease", "acme", "tenant-acme")
    assert release["spec"]["values"]["sleep"]["auto"]["afterInactivity"]
    driver.reconcile([make_tenant()], complete=True)  # resume
    assert kube_emulator.get_object(KUEUE, "ClusterQueue", "tenant-acme")["spec"]["stopPolicy"] == "None"
    release = kube_emulator.get_object("helm.toolkit.fluxcd.io/v2", "HelmRelease", "acme", "tenant-acme")
    assert "sleep" not in release["spec"]["values"]


def converge(driver: KubernetesDriver, tenants: list[Any], passes: int = 30) -> ReconcileResult:
    """Reconcile until a pass ends without a temporary error, as the reconciler's retries would."""
    for _ in range(passes):
        try:
            return driver.reconcile(tenants, complete=True)
        except TemporaryDriverError:
            continue
    raise AssertionError(f"no convergence in {passes} passes")


def test_injected_conflicts_throttling_errors_and_timeouts_end_in_convergence():
    faults = Faults(share=0.25, kinds=(409, 429, 500, "timeout"), seed=7, hang_seconds=0.4)
    with start_emulator(crds=("kueue", "flux"), faults=faults) as em:
        api_client = api_client_for_url(em.url)
        driver = KubernetesDriver(api_client, ClusterProfile(), retry=FAST)
        tenants = [make_tenant(slug) for slug in ("a", "b", "c")]

        converge(driver, tenants)
        em.call(setattr, em.emulator.faults, "share", 0.0)
        steady = driver.reconcile(tenants, complete=True)

        assert steady.writes == 0
        assert steady.errors == {}
        assert set(em.emulator.injected) == {409, 429, 500, "timeout"}
        assert sorted(q["metadata"]["name"] for q in em.objects_of(KUEUE, "ClusterQueue")) == [
            "tenant-a",
            "tenant-b",
            "tenant-c",
        ]
        assert len(em.objects_of("helm.toolkit.fluxcd.io/v2", "HelmRelease")) == 3
        assert len(em.objects_of("v1", "Namespace")) == 3
        api_client.close()


def test_a_forbidden_namespace_is_a_permanent_error_on_that_tenant_only():
    faults = Faults(forbidden={"/api/v1/namespaces/tenant-b"})
    with start_emulator(crds=("kueue", "flux"), faults=faults) as em:
        driver = KubernetesDriver(api_client_for_url(em.url), ClusterProfile(), retry=FAST)

        result = driver.reconcile([make_tenant("a"), make_tenant("b")], complete=True)

        assert result.errors["b"].startswith("Namespace tenant-b: ")
        assert "is forbidden" in result.errors["b"]
        assert result.observations["b"].phase == "failed"
        assert result.observations["a"].phase == "provisioning"
        assert "a" not in result.errors
        assert em.get_object(KUEUE, "ClusterQueue", "tenant-b") is None  # no partial state after the failure


def test_an_invalid_object_is_a_permanent_error_with_the_servers_message():
    faults = Faults(invalid={"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/tenant-acme"})
    with start_emulator(crds=("kueue", "flux"), faults=faults) as em:
        driver = KubernetesDriver(api_client_for_url(em.url), ClusterProfile(), retry=FAST)

        result = driver.reconcile([make_tenant()], complete=True)

        assert result.errors["acme"].startswith("ClusterQueue tenant-acme: ")
        assert "rejected by admission" in result.errors["acme"]
        assert result.observations["acme"].phase == "failed"


def test_a_pass_that_keeps_hitting_temporary_errors_says_what_it_saw():
    with start_emulator(crds=("kueue", "flux")) as em:
        driver = KubernetesDriver(api_client_for_url(em.url), ClusterProfile(), retry=FAST)
        driver.reconcile([make_tenant()], complete=True)
        em.remove_object("v1", "LimitRange", "gpucloud-defaults", "tenant-acme")
        # Lists succeed; the one write needed keeps failing.
        em.call(setattr, em.emulator, "faults", Faults(share=1.0, kinds=(503,), methods=frozenset({"PATCH"})))

        with pytest.raises(PartialReconcile) as partial:
            driver.reconcile([make_tenant()], complete=True)

        assert "HTTP 503" in partial.value.failures[0]
        assert partial.value.result.observations["acme"].phase == "provisioning"
        assert partial.value.result.drift_repaired == 1
        assert em.emulator.injected[503] == FAST.attempts


def test_a_missing_crd_is_a_permanent_error_and_nothing_is_written():
    with start_emulator(crds=("flux",)) as em:
        driver = KubernetesDriver(api_client_for_url(em.url), ClusterProfile(), retry=FAST)

        result = driver.reconcile([make_tenant()], complete=True)

        assert "ClusterQueue (kueue.x-k8s.io/v1beta2)" in result.errors["acme"]
        assert result.observations["acme"].phase == "failed"
        assert result.writes == 0


def test_refused_credentials_are_a_permanent_error_of_the_host_cluster():
    with start_emulator(crds=("kueue", "flux"), faults=Faults(share=1.0, kinds=(401,))) as em:
        # a generous timeout: a client timeout on a loaded machine would be retried and blur the count
        patient = RetryPolicy(attempts=6, base_seconds=0.001, cap_seconds=0.01, timeout_seconds=10)
        driver = KubernetesDriver(api_client_for_url(em.url), ClusterProfile(), retry=patient)

        with pytest.raises(PermanentDriverError, match="kubeconfig expired"):
            driver.reconcile([make_tenant()], complete=True)
        assert em.emulator.injected[401] == 1  # not retried


def test_an_unreachable_cluster_is_a_temporary_error():
    em = start_emulator()
    url = em.url
    em.stop()
    driver = KubernetesDriver(api_client_for_url(url), ClusterProfile(), retry=FAST)

    with pytest.raises(TemporaryDriverError, match="attempts"):
        driver.reconcile([make_tenant()], complete=True)


def test_a_vcluster_platform_host_gets_virtual_cluster_instances(kube_emulator, kube_client):
    kube_emulator.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "p-gpucloud"}})
    driver = KubernetesDriver(kube_client, ClusterProfile(vcluster_mode="platform", platform_cluster="h1"))

    assert driver.reconcile([make_tenant()], complete=True).observations["acme"].phase == "provisioning"
    instance = kube_emulator.get_object(
        "management.loft.sh/v1", "VirtualClusterInstance", "acme", "p-gpucloud"
    )
    assert instance["spec"]["clusterRef"]["namespace"] == "tenant-acme"
    assert kube_emulator.make_vcluster_instance_ready("p-gpucloud", "acme")
    assert driver.reconcile([make_tenant()], complete=True).observations["acme"].phase == "ready"


def test_a_driver_built_from_kubeconfig_text_talks_to_its_cluster(kube_emulator):
    kubeconfig = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "host",
            "clusters": [{"name": "host", "cluster": {"server": kube_emulator.url}}],
            "users": [{"name": "admin", "user": {"token": "secret-token"}}],
            "contexts": [{"name": "host", "context": {"cluster": "host", "user": "admin"}}],
        }
    )
    driver = KubernetesDriver(api_client_from_kubeconfig(kubeconfig), ClusterProfile())

    assert driver.reconcile([make_tenant()], complete=True).errors == {}
    assert kube_emulator.get_object("v1", "Namespace", "tenant-acme")


def kueue_workload(
    name: str,
    namespace: str,
    *,
    gpus: dict[str, str],
    count: int = 1,
    conditions: tuple[str, ...] = (),
    flavor: str | None = None,
) -> dict[str, Any]:
    """A Kueue `Workload` (v1beta2) as Kueue writes it for a Job (integration-shapes.md § 5)."""
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": c,
                "status": "True",
                "reason": c,
                "message": "",
                "lastTransitionTime": "2026-05-01T10:00:00Z",
            }
            for c in conditions
        ]
    }
    if flavor:
        status["admission"] = {
            "clusterQueue": namespace,
            "podSetAssignments": [{"name": "main", "flavors": dict.fromkeys(gpus, flavor), "count": count}],
        }
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "default",
            "active": True,
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": gpus}}]}},
                }
            ],
        },
        "status": status,
    }


def test_each_tenants_kueue_workloads_are_observed_with_gpus_class_and_state(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile())
    tenants = [make_tenant("a"), make_tenant("b")]
    driver.reconcile(tenants, complete=True)
    put = kube_emulator.put_object
    put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    put(
        kueue_workload(
            "job-train-1",
            "tenant-a",
            gpus={"nvidia.com/gpu": "2"},
            count=4,
            flavor="h200-141gb",
            conditions=("QuotaReserved", "Admitted"),
        )
    )
    put(kueue_workload("job-tiny-2", "tenant-a", gpus={"nvidia.com/mig-1g.18gb": "1"}, count=3))
    put(
        kueue_workload(
            "job-done-3",
            "tenant-a",
            gpus={"nvidia.com/gpu": "1"},
            flavor="h200-141gb",
            conditions=("Admitted", "Finished"),
        )
    )
    put(kueue_workload("job-other", "tenant-b", gpus={"nvidia.com/gpu": "8"}))
    put(kueue_workload("job-elsewhere", "research", gpus={"nvidia.com/gpu": "8"}))
    kube_emulator.reset_counters()

    result = driver.reconcile(tenants, complete=True)

    a = {w.name: (w.queue, w.state, w.gpus, w.gpu_class) for w in result.workloads["a"]}
    assert a == {
        "job-train-1": ("default", "admitted", 8, "h200-141gb"),
        "job-tiny-2": ("default", "pending", 3, "h200-141gb.mig-1g.18gb"),
        "job-done-3": ("default", "finished", 1, "h200-141gb"),
    }
    assert [w.name for w in result.workloads["b"]] == ["job-other"]
    created = kube_emulator.get_object(KUEUE, "Workload", "job-done-3", "tenant-a")["metadata"][
        "creationTimestamp"
    ]
    assert result.workloads["a"][0].created_at == datetime.fromisoformat(created)
    workload_lists = [p for m, p, _ in kube_emulator.log if m == "GET" and p.endswith("/workloads")]
    assert workload_lists == ["/apis/kueue.x-k8s.io/v1beta2/workloads"]  # one list for every tenant
    assert result.writes == 0


def test_a_kai_cluster_lists_no_kueue_workloads(kube_emulator, kube_client):
    driver = KubernetesDriver(kube_client, ClusterProfile(scheduler="kai"))
    result = driver.reconcile([make_tenant()], complete=True)

    assert result.workloads == {}
    assert not [p for m, p, _ in kube_emulator.log if p.endswith("/workloads")]
