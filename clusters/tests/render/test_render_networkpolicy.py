from clusters.render import ClusterProfile
from clusters.render.networkpolicy import render_network_policies
from gpucloud.kube.meta import TENANT


def test_it_admits_only_its_own_namespace_and_non_tenant_namespaces(make_tenant):
    (policy,) = render_network_policies(make_tenant(), ClusterProfile())
    spec = policy["spec"]
    assert spec["podSelector"] == {}
    assert spec["policyTypes"] == ["Ingress"]
    sources = [peer for rule in spec["ingress"] for peer in rule["from"]]
    assert {"podSelector": {}} in sources
    assert {
        "namespaceSelector": {"matchExpressions": [{"key": TENANT, "operator": "DoesNotExist"}]}
    } in sources
    assert all("ipBlock" not in peer for peer in sources)


def test_cilium_clusters_also_get_an_explicit_deny(make_tenant):
    policies = render_network_policies(make_tenant(), ClusterProfile(cilium=True))
    assert [p["kind"] for p in policies] == ["NetworkPolicy", "CiliumNetworkPolicy"]
    (deny,) = policies[1]["spec"]["ingressDeny"]
    expressions = deny["fromEndpoints"][0]["matchExpressions"]
    assert {
        "key": "k8s:io.kubernetes.pod.namespace",
        "operator": "NotIn",
        "values": ["tenant-acme"],
    } in expressions
