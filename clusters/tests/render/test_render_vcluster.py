import yaml

from clusters.render import ClusterProfile
from clusters.render.profile import OidcSettings
from clusters.render.vcluster import render_vcluster


def test_a_helm_release_installs_the_vcluster_chart_from_loft(make_tenant):
    repo, release = render_vcluster(make_tenant(), ClusterProfile(vcluster_chart_version="0.37.0"))
    assert repo["apiVersion"] == "source.toolkit.fluxcd.io/v1"
    assert repo["kind"] == "HelmRepository"
    assert repo["spec"]["url"] == "https://charts.loft.sh"
    assert release["apiVersion"] == "helm.toolkit.fluxcd.io/v2"
    assert release["metadata"] == release["metadata"] | {"name": "acme", "namespace": "tenant-acme"}
    chart = release["spec"]["chart"]["spec"]
    assert chart == {
        "chart": "vcluster",
        "version": "0.37.0",
        "sourceRef": {"kind": "HelmRepository", "name": repo["metadata"]["name"]},
    }
    assert release["spec"]["interval"]


def test_values_sync_pods_show_gpu_nodes_and_leave_scheduling_to_the_host(make_tenant):
    profile = ClusterProfile(endpoint_base="https://vc.gpu.example")
    values = render_vcluster(make_tenant(), profile)[1]["spec"]["values"]
    assert values["sync"]["toHost"]["pods"]["enabled"] is True
    assert values["sync"]["fromHost"]["nodes"] == {
        "enabled": True,
        "selector": {"labels": {"nvidia.com/gpu.present": "true"}},
    }
    assert values["controlPlane"]["advanced"]["virtualScheduler"]["enabled"] is False
    assert values["exportKubeConfig"]["server"] == "https://acme.vc.gpu.example"
    assert "experimental" not in values
    assert "sleep" not in values


def test_kai_clusters_do_not_set_owner_references(make_tenant):
    values = render_vcluster(make_tenant(), ClusterProfile(scheduler="kai"))[1]["spec"]["values"]
    assert values["experimental"] == {"syncSettings": {"setOwner": False}}


def test_sleep_settings_follow_the_profile_and_suspension(make_tenant):
    running = render_vcluster(make_tenant(), ClusterProfile(sleep_after_inactivity="2h"))[1]
    suspended = render_vcluster(make_tenant(desired="suspended"), ClusterProfile())[1]
    assert running["spec"]["values"]["sleep"] == {"auto": {"afterInactivity": "2h"}}
    assert suspended["spec"]["values"]["sleep"] == {"auto": {"afterInactivity": "1m"}}


def test_platform_mode_renders_a_virtual_cluster_instance(make_tenant):
    profile = ClusterProfile(
        vcluster_mode="platform", platform_project_namespace="p-gpu", platform_cluster="h1"
    )
    (instance,) = render_vcluster(make_tenant(), profile)
    assert instance["apiVersion"] == "management.loft.sh/v1"
    assert instance["kind"] == "VirtualClusterInstance"
    assert instance["metadata"]["namespace"] == "p-gpu"
    spec = instance["spec"]
    assert spec["clusterRef"] == {"cluster": "h1", "namespace": "tenant-acme", "virtualCluster": "acme"}
    helm = spec["template"]["helmRelease"]
    assert helm["chart"]["name"] == "vcluster"
    assert yaml.safe_load(helm["values"])["sync"]["toHost"]["pods"]["enabled"] is True


def test_the_vcluster_enforces_its_tiers_pod_security_standard_inside(make_tenant):
    for tier, level in (("isolated", "restricted"), ("standard", "baseline"), ("trusted", "baseline")):
        values = render_vcluster(make_tenant(trust_tier=tier), ClusterProfile())[1]["spec"]["values"]
        assert values["policies"]["podSecurityStandard"] == level, tier
    profile = ClusterProfile(pod_security=(("trusted", "privileged"),))
    values = render_vcluster(make_tenant(trust_tier="trusted"), profile)[1]["spec"]["values"]
    assert values["policies"]["podSecurityStandard"] == "privileged"


def test_under_restricted_the_control_plane_and_coredns_run_as_non_root(make_tenant):
    values = render_vcluster(make_tenant(trust_tier="isolated"), ClusterProfile())[1]["spec"]["values"]
    for component in ("statefulSet", "coredns"):
        security = values["controlPlane"][component]["security"]
        assert security["podSecurityContext"]["runAsNonRoot"] is True, component
        container = security["containerSecurityContext"]
        assert container["runAsUser"] != 0, component
        assert container["capabilities"] == {"drop": ["ALL"]}, component
        assert container["seccompProfile"] == {"type": "RuntimeDefault"}, component
        assert container["allowPrivilegeEscalation"] is False, component
    assert values["controlPlane"]["distro"]["k8s"]["securityContext"]["runAsNonRoot"] is True
    standard = render_vcluster(make_tenant(), ClusterProfile())[1]["spec"]["values"]
    assert "statefulSet" not in standard["controlPlane"]  # baseline: the chart's defaults pass


def test_restricted_security_keeps_the_oidc_api_server_flags(make_tenant):
    profile = ClusterProfile(oidc=OidcSettings(issuer="https://id.example", client_id="gpucloud"))
    values = render_vcluster(make_tenant(trust_tier="isolated"), profile)[1]["spec"]["values"]
    k8s = values["controlPlane"]["distro"]["k8s"]
    assert k8s["enabled"] is True
    assert "--oidc-issuer-url=https://id.example" in k8s["apiServer"]["extraArgs"]
    assert k8s["securityContext"]["runAsNonRoot"] is True


def test_the_vclusters_coredns_resolves_through_the_host_dns_its_egress_policy_allows(make_tenant):
    values = render_vcluster(make_tenant(), ClusterProfile())[1]["spec"]["values"]
    assert values["networking"] == {"advanced": {"fallbackHostCluster": True}}


def test_an_isolated_tenants_vcluster_syncs_only_its_nodes_and_tolerates_only_their_taint(make_tenant):
    solo = make_tenant("solo", trust_tier="isolated", dedicated_nodes=("h200-3", "h200-4"))
    values = render_vcluster(solo, ClusterProfile())[1]["spec"]["values"]

    # vCluster's syncer sets these labels as the node selector of every synced pod, and appends the
    # toleration, parsed as key=value:Effect (operator Equal), to every pod's tolerations.
    assert values["sync"]["fromHost"]["nodes"]["selector"]["labels"] == {
        "nvidia.com/gpu.present": "true",
        "gpucloud.io/tenant": "solo",
    }
    assert values["sync"]["toHost"]["pods"]["enforceTolerations"] == ["gpucloud.io/tenant=solo:NoSchedule"]


def test_other_tiers_sync_the_shared_gpu_nodes_and_enforce_no_toleration(make_tenant):
    for tier in ("standard", "trusted"):
        values = render_vcluster(make_tenant(trust_tier=tier), ClusterProfile())[1]["spec"]["values"]
        assert values["sync"]["fromHost"]["nodes"]["selector"]["labels"] == {"nvidia.com/gpu.present": "true"}
        assert "enforceTolerations" not in values["sync"]["toHost"]["pods"]
