"""The Pod Security labels gpucloud renders, judged by the port of the upstream checks (tests/judges).

Each check of the baseline and restricted levels on a minimal pod that violates it and one that passes; the
message in upstream's words and order; the levels per tier as rendered; and the pods that must keep
running: tenants' ordinary GPU workloads, the vCluster's own control plane, and the GPU Operator's
privileged daemons in their own (unlabelled) namespace.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from clusters.render import ClusterProfile, render_shared, render_tenant
from clusters.render.vcluster import render_values
from clusters.spec import TenantSpec, TrustTier
from tests.judges import pod_security
from tests.judges.pod_security import evaluate, judge, parse_version
from tests.judges.world import World

LATEST = pod_security.LATEST
GPU = {"limits": {"nvidia.com/gpu": "1"}}


def tenant(slug: str, tier: TrustTier) -> TenantSpec:
    return TenantSpec(
        slug=slug, public_id=f"ten_{slug}", trust_tier=tier, desired="running", namespace=f"tenant-{slug}"
    )


def world(profile: ClusterProfile | None = None) -> World:
    profile = profile or ClusterProfile()
    tenants = (tenant("iso", "isolated"), tenant("std", "standard"), tenant("tru", "trusted"))
    rendered = render_shared(tenants, profile) + [o for t in tenants for o in render_tenant(t, profile)]
    return World(profile=profile, tenants=tenants, rendered=tuple(rendered))


def restricted_pod(namespace: str = "tenant-iso") -> dict[str, Any]:
    """A GPU pod that passes `restricted`: what an isolated tenant's training job looks like."""
    context = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": GPU,
                    "securityContext": context,
                }
            ],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "shm", "emptyDir": {"medium": "Memory"}},
            ],
        },
    }


def plain_pod(namespace: str = "tenant-std") -> dict[str, Any]:
    """A GPU pod with no security settings at all: what most tenants submit."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "notebook", "namespace": namespace},
        "spec": {"containers": [{"name": "jupyter", "image": "jupyter/pytorch-notebook", "resources": GPU}]},
    }


def container(pod: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = pod["spec"]["containers"][0]
    return first


def ctx(pod: dict[str, Any]) -> dict[str, Any]:
    context: dict[str, Any] = container(pod).setdefault("securityContext", {})
    return context


def pod_ctx(pod: dict[str, Any]) -> dict[str, Any]:
    context: dict[str, Any] = pod["spec"].setdefault("securityContext", {})
    return context


Mutation = Callable[[dict[str, Any]], Any]

# (check, a change that violates it, the reason upstream gives, a change of the same field that passes)
BASELINE: list[tuple[str, Mutation, str, Mutation]] = [
    (
        "appArmorProfile",
        lambda p: ctx(p).update(appArmorProfile={"type": "Unconfined"}),
        'forbidden AppArmor profile (container "trainer" must not set AppArmor profile type to "Unconfined")',
        lambda p: ctx(p).update(appArmorProfile={"type": "RuntimeDefault"}),
    ),
    (
        "appArmorProfile annotation",
        lambda p: p["metadata"].update(
            annotations={"container.apparmor.security.beta.kubernetes.io/trainer": "unconfined"}
        ),
        "forbidden AppArmor profile (annotation must not set AppArmor profile type to "
        '"container.apparmor.security.beta.kubernetes.io/trainer="unconfined"")',
        lambda p: p["metadata"].update(
            annotations={"container.apparmor.security.beta.kubernetes.io/trainer": "localhost/x"}
        ),
    ),
    (
        "capabilities_baseline",
        lambda p: ctx(p).update(capabilities={"add": ["SYS_ADMIN", "NET_RAW"]}),
        'non-default capabilities (container "trainer" must not include "NET_RAW", "SYS_ADMIN" in '
        "securityContext.capabilities.add)",
        lambda p: ctx(p).update(capabilities={"add": ["CHOWN"]}),
    ),
    (
        "hostNamespaces",
        lambda p: p["spec"].update(hostNetwork=True, hostPID=True),
        "host namespaces (hostNetwork=true, hostPID=true)",
        lambda p: p["spec"].update(hostNetwork=False, hostIPC=False),
    ),
    (
        "hostPathVolumes",
        lambda p: p["spec"].setdefault("volumes", []).append({"name": "root", "hostPath": {"path": "/"}}),
        'hostPath volumes (volume "root")',
        lambda p: p["spec"].setdefault("volumes", []).append({"name": "scratch", "emptyDir": {}}),
    ),
    (
        "hostPorts",
        lambda p: container(p).update(ports=[{"containerPort": 80, "hostPort": 8080}]),
        'hostPort (container "trainer" uses hostPort 8080)',
        lambda p: container(p).update(ports=[{"containerPort": 80}]),
    ),
    (
        "hostProbesAndHostLifecycle",
        lambda p: container(p).update(livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}}),
        'probe or lifecycle host (container "trainer" uses probe or lifecycle host "10.0.0.1")',
        lambda p: container(p).update(livenessProbe={"httpGet": {"port": 80}}),
    ),
    (
        "privileged",
        lambda p: ctx(p).update(privileged=True),
        'privileged (container "trainer" must not set securityContext.privileged=true)',
        lambda p: ctx(p).update(privileged=False),
    ),
    (
        "procMount",
        lambda p: ctx(p).update(procMount="Unmasked"),
        'procMount (container "trainer" must not set securityContext.procMount to "Unmasked")',
        lambda p: ctx(p).update(procMount="Default"),
    ),
    (
        "seLinuxOptions",
        lambda p: pod_ctx(p).update(seLinuxOptions={"type": "spc_t", "user": "root"}),
        'seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "spc_t"; '
        "user may not be set)",
        lambda p: pod_ctx(p).update(seLinuxOptions={"type": "container_engine_t", "level": "s0:c1"}),
    ),
    (
        "seccompProfile_baseline",
        lambda p: ctx(p).update(seccompProfile={"type": "Unconfined"}),
        'seccompProfile (container "trainer" must not set securityContext.seccompProfile.type to '
        '"Unconfined")',
        lambda p: ctx(p).update(seccompProfile={"type": "Localhost", "localhostProfile": "gpu.json"}),
    ),
    (
        "sysctls",
        lambda p: pod_ctx(p).update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
        "forbidden sysctls (kernel.msgmax)",
        lambda p: pod_ctx(p).update(sysctls=[{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]),
    ),
    (
        "windowsHostProcess",
        lambda p: ctx(p).update(windowsOptions={"hostProcess": True}),
        'hostProcess (container "trainer" must not set securityContext.windowsOptions.hostProcess=true)',
        lambda p: ctx(p).update(windowsOptions={"hostProcess": False}),
    ),
]

RESTRICTED: list[tuple[str, Mutation, str, Mutation]] = [
    (
        "allowPrivilegeEscalation",
        lambda p: ctx(p).pop("allowPrivilegeEscalation"),
        'allowPrivilegeEscalation != false (container "trainer" must set '
        "securityContext.allowPrivilegeEscalation=false)",
        lambda p: ctx(p).update(allowPrivilegeEscalation=False),
    ),
    (
        "capabilities_restricted drop",
        lambda p: ctx(p).update(capabilities={"drop": ["NET_RAW"]}),
        'unrestricted capabilities (container "trainer" must set securityContext.capabilities.drop=["ALL"])',
        lambda p: ctx(p).update(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
    ),
    (
        "capabilities_restricted add",
        lambda p: ctx(p).update(capabilities={"drop": ["ALL"], "add": ["CHOWN"]}),
        'unrestricted capabilities (container "trainer" must not include "CHOWN" in '
        "securityContext.capabilities.add)",
        lambda p: ctx(p).update(capabilities={"drop": ["ALL"]}),
    ),
    (
        "restrictedVolumes",
        lambda p: p["spec"]["volumes"].append({"name": "models", "nfs": {"server": "nas", "path": "/m"}}),
        'restricted volume types (volume "models" uses restricted volume type "nfs")',
        lambda p: p["spec"]["volumes"].append({"name": "models", "csi": {"driver": "nfs.csi.k8s.io"}}),
    ),
    (
        "runAsNonRoot",
        lambda p: ctx(p).pop("runAsNonRoot"),
        'runAsNonRoot != true (pod or container "trainer" must set securityContext.runAsNonRoot=true)',
        lambda p: (ctx(p).pop("runAsNonRoot"), pod_ctx(p).update(runAsNonRoot=True)),
    ),
    (
        "runAsUser",
        lambda p: pod_ctx(p).update(runAsUser=0),
        "runAsUser=0 (pod must not set runAsUser=0)",
        lambda p: pod_ctx(p).update(runAsUser=1000),
    ),
    (
        "seccompProfile_restricted",
        lambda p: ctx(p).pop("seccompProfile"),
        'seccompProfile (pod or container "trainer" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")',
        lambda p: (
            ctx(p).pop("seccompProfile"),
            pod_ctx(p).update(seccompProfile={"type": "RuntimeDefault"}),
        ),
    ),
]


def changed(change: Mutation, base: Callable[[], dict[str, Any]] = restricted_pod) -> dict[str, Any]:
    pod = base()
    change(pod)
    return pod


@pytest.mark.parametrize(("check", "violate", "reason", "allow"), BASELINE, ids=[c[0] for c in BASELINE])
@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_each_baseline_check_refuses_its_violation_at_both_levels_and_passes_the_allowed_value(
    check, violate, reason, allow, level
):
    assert evaluate(restricted_pod(), level, LATEST) == []
    refusals = [f"{r} ({d})" for r, d in evaluate(changed(violate), level, LATEST)]
    if level == "restricted" and check == "hostPathVolumes":  # restricted replaces it with its volume check
        reason = 'restricted volume types (volume "root" uses restricted volume type "hostPath")'
    if level == "restricted" and check == "capabilities_baseline":  # and this one with its capabilities check
        reason = (
            "unrestricted capabilities "
            '(container "trainer" must set securityContext.capabilities.drop=["ALL"]; '
            'container "trainer" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add)'
        )
    assert refusals == [reason]
    allowed = changed(allow)
    if level == "restricted" and check == "capabilities_baseline":
        ctx(allowed)["capabilities"]["drop"] = ["ALL"]
        assert evaluate(allowed, level, LATEST)  # CHOWN is baseline's, not restricted's
        return
    assert evaluate(allowed, level, LATEST) == []


@pytest.mark.parametrize(("check", "violate", "reason", "allow"), RESTRICTED, ids=[c[0] for c in RESTRICTED])
def test_each_restricted_check_refuses_its_violation_and_passes_the_allowed_value(
    check, violate, reason, allow
):
    refusals = [f"{r} ({d})" for r, d in evaluate(changed(violate), "restricted", LATEST)]
    assert refusals == [reason]
    assert evaluate(changed(violate), "baseline", LATEST) == []  # baseline does not ask for it
    assert evaluate(changed(allow), "restricted", LATEST) == []


def test_the_message_names_the_level_and_version_and_lists_baseline_checks_before_restricted_ones():
    pod = restricted_pod()
    ctx(pod).update(privileged=True, allowPrivilegeEscalation=True)
    pod["spec"]["hostIPC"] = True
    (message,) = judge(pod, world())
    assert message == (
        'violates PodSecurity "restricted:v1.34": host namespaces (hostIPC=true), '
        'privileged (container "trainer" must not set securityContext.privileged=true), '
        'allowPrivilegeEscalation != false (container "trainer" must set '
        "securityContext.allowPrivilegeEscalation=false)"
    )


def test_init_and_ephemeral_containers_are_checked_and_named_together():
    pod = plain_pod()
    sidecar = {"name": "setup", "image": "busybox", "securityContext": {"privileged": True}}
    pod["spec"]["initContainers"] = [sidecar]
    pod["spec"]["ephemeralContainers"] = [{**sidecar, "name": "debug"}]
    assert evaluate(pod, "baseline", LATEST) == [
        ("privileged", 'containers "setup", "debug" must not set securityContext.privileged=true')
    ]


def test_checks_follow_the_enforced_version():
    probe = changed(
        lambda p: container(p).update(readinessProbe={"tcpSocket": {"host": "1.2.3.4", "port": 1}})
    )
    assert evaluate(probe, "baseline", (1, 33)) == []  # the host-probe check exists from v1.34
    assert evaluate(probe, "baseline", (1, 34))
    rmem = changed(lambda p: pod_ctx(p).update(sysctls=[{"name": "net.ipv4.tcp_rmem", "value": "4096"}]))
    assert evaluate(rmem, "baseline", (1, 31)) == [("forbidden sysctls", "net.ipv4.tcp_rmem")]
    assert evaluate(rmem, "baseline", (1, 32)) == []
    engine = changed(lambda p: pod_ctx(p).update(seLinuxOptions={"type": "container_engine_t"}))
    assert evaluate(engine, "baseline", (1, 30))
    assert evaluate(engine, "baseline", (1, 31)) == []


def test_user_namespaces_relax_root_and_proc_mount_from_v1_35_only():
    pod = changed(
        lambda p: (
            ctx(p).pop("runAsNonRoot"),
            ctx(p).update(procMount="Unmasked"),
            p["spec"].update(hostUsers=False),
        )
    )
    assert [r for r, _ in evaluate(pod, "restricted", (1, 34))] == ["procMount", "runAsNonRoot != true"]
    assert [r for r, _ in evaluate(pod, "restricted", (1, 35))] == ["procMount"]  # restricted keeps procMount
    assert evaluate(pod, "baseline", (1, 35)) == []


def test_windows_pods_need_no_linux_only_settings_from_v1_25():
    pod = changed(
        lambda p: (
            p["spec"]["containers"][0].update(securityContext={"runAsNonRoot": True}),
            p["spec"].update(os={"name": "windows"}),
        )
    )
    assert evaluate(pod, "restricted", (1, 25)) == []
    assert {r for r, _ in evaluate(pod, "restricted", (1, 24))} == {
        "allowPrivilegeEscalation != false",
        "unrestricted capabilities",
        "seccompProfile",
    }


def test_versions_are_latest_or_v_major_minor():
    assert parse_version("latest") == LATEST
    assert parse_version("v1.34") == (1, 34)
    assert parse_version("v1.99") == LATEST  # newer than any check: the newest checks
    for bad in ("1.34", "v1", "vX.Y", ""):
        with pytest.raises(ValueError, match="latest or v"):
            parse_version(bad)
    with pytest.raises(ValueError, match="privileged, baseline or restricted"):
        evaluate(plain_pod(), "strict", LATEST)


def test_each_tier_enforces_its_rendered_level():
    w = world()
    hostile = plain_pod()
    ctx(hostile).update(privileged=True)
    for namespace in ("tenant-iso", "tenant-std", "tenant-tru"):
        assert judge({**hostile, "metadata": {"name": "x", "namespace": namespace}}, w), namespace
    ordinary = plain_pod()
    assert judge({**ordinary, "metadata": {"name": "nb", "namespace": "tenant-std"}}, w) == []
    assert judge({**ordinary, "metadata": {"name": "nb", "namespace": "tenant-tru"}}, w) == []
    (message,) = judge({**ordinary, "metadata": {"name": "nb", "namespace": "tenant-iso"}}, w)
    assert message.startswith('violates PodSecurity "restricted:v1.34": allowPrivilegeEscalation != false')
    assert judge(restricted_pod("tenant-iso"), w) == []


def test_a_tier_set_to_privileged_admits_what_baseline_refuses():
    w = world(
        ClusterProfile(
            pod_security=(("isolated", "restricted"), ("standard", "baseline"), ("trusted", "privileged"))
        )
    )
    pod = plain_pod("tenant-tru")
    ctx(pod).update(privileged=True)
    assert judge(pod, w) == []
    assert judge({**pod, "metadata": {"name": "p", "namespace": "tenant-std"}}, w)


def test_the_gpu_operators_privileged_daemons_run_in_their_own_namespace_which_gpucloud_does_not_label():
    device_plugin = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nvidia-device-plugin-daemonset-x", "namespace": "gpu-operator"},
        "spec": {
            "containers": [
                {
                    "name": "nvidia-device-plugin",
                    "image": "nvcr.io/nvidia/k8s-device-plugin",
                    "securityContext": {"privileged": True},
                }
            ],
            "volumes": [{"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}],
        },
    }
    w = world()
    assert "gpu-operator" not in {ns["metadata"]["name"] for ns in w.objects("Namespace")}
    assert judge(device_plugin, w) == []
    assert evaluate(device_plugin, "baseline", LATEST)  # it would not run in a tenant's namespace


def test_the_vclusters_own_pods_pass_the_level_of_the_namespace_they_run_in():
    """The control plane and its CoreDNS run in the tenant's host namespace, under its Pod Security level."""
    tiers: tuple[tuple[TrustTier, str], ...] = (("isolated", "restricted"), ("standard", "baseline"))
    for tier, level in tiers:
        values = render_values(tenant("acme", tier), ClusterProfile())
        plane = values["controlPlane"]
        for component in ("statefulSet", "coredns"):
            security = (plane.get(component) or {}).get("security") or CHART_DEFAULTS[component]
            pod = {
                "metadata": {"name": component, "namespace": "tenant-acme"},
                "spec": {
                    "securityContext": security.get("podSecurityContext") or {},
                    "initContainers": [
                        {
                            "name": "kubernetes",
                            "securityContext": (plane.get("distro") or {})
                            .get("k8s", {})
                            .get("securityContext")
                            or {},
                        }
                    ],
                    "containers": [
                        {"name": component, "securityContext": security["containerSecurityContext"]}
                    ],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                },
            }
            assert evaluate(pod, level, LATEST) == [], (tier, component)


# vcluster chart 0.37 values.yaml: what the chart sets when gpucloud sets nothing (baseline tiers).
CHART_DEFAULTS = {
    "statefulSet": {
        "podSecurityContext": {},
        "containerSecurityContext": {"allowPrivilegeEscalation": False, "runAsUser": 0, "runAsGroup": 0},
    },
    "coredns": {"podSecurityContext": {}, "containerSecurityContext": {}},
}


def test_judging_does_not_change_the_pod():
    pod = changed(lambda p: ctx(p).update(privileged=True))
    before = copy.deepcopy(pod)
    judge(pod, world())
    assert pod == before
