"""The scheduler extender as kube-scheduler reaches it: real HTTP, an emulated host cluster, real tokens."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters.render import ClusterProfile
from clusters.render.namespace import render_namespace
from clusters.tests.conftest import kubeconfig_for, make_tenant
from core.audit import Actor
from fleet.models import HostCluster
from gpucloud import crypto
from gpucloud.kube.api import KubeApi, RetryPolicy, api_client_for_url
from placement.engine.fleet import NodeSpec, Tier
from placement.extender.feed import ClusterFeed, namespace_tenant
from placement.extender.http import ExtenderServer, NotReady
from placement.extender.service import Registry
from placement.extender.state import Extender
from tenants.tokens import create_token
from tests.kube_emulator import RunningEmulator, start_emulator

DOCS = Path(__file__).resolve().parents[2] / "docs" / "placement.md"
FAST = RetryPolicy(attempts=1, timeout_seconds=2.0)
MIG_1G = "nvidia.com/mig-1g.10gb"


def gpu_node(name: str, product: str = "NVIDIA-H100", gpus: int = 8, mig: str = "") -> dict[str, Any]:
    """A GPU node; ``mig="nvidia.com/mig-1g.10gb=2"``: what its device plugin advertises of a MIG profile."""
    allocatable = {"cpu": "96", "memory": "1000Gi", "nvidia.com/gpu": str(gpus)}
    if mig:
        resource, count = mig.split("=")
        allocatable[resource] = count
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus)},
        },
        "status": {"allocatable": allocatable},
    }


def pod(
    name: str,
    gpus: int,
    node: str | None = None,
    phase: str = "Running",
    ns: str = "team",
    resource: str = "nvidia.com/gpu",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "4", "memory": "16Gi", resource: str(gpus)}}}
        ]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
        "status": {"phase": phase},
    }


def call(url: str, path: str, body: bytes, token: str | None = None) -> tuple[int, Any]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", path, body, headers)
    response = conn.getresponse()
    answer = json.loads(response.read())
    conn.close()
    return response.status, answer


def args(p: dict[str, Any], names: list[str]) -> bytes:
    return json.dumps({"Pod": p, "NodeNames": names}).encode()


@pytest.fixture
def cluster() -> Any:
    em = start_emulator()
    em.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    for n in ("gpu-1", "gpu-2"):
        em.put_object(gpu_node(n))
    em.put_object({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-1"}, "status": {}})
    yield em
    em.stop()


@pytest.fixture
def server() -> Any:
    nodes = [NodeSpec("gpu-1", 96_000, 1_000_000, 8, "H100"), NodeSpec("gpu-2", 96_000, 1_000_000, 8, "H100")]
    extender = Extender(nodes)

    def resolve(name: str) -> Extender | None:
        if name == "warming":
            raise NotReady("host cluster 'warming': listing the host cluster's nodes and pods")
        return extender if name == "east" else None

    srv = ExtenderServer(("127.0.0.1", 0), resolve, lambda token: token == "good")
    srv.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_filter_and_prioritize_answer_over_http_with_a_token(server):
    body = args(pod("p", 2), ["gpu-1", "gpu-2", "cpu-1"])
    status, result = call(server.url, "/scheduler/v1/east/filter", body, "good")
    assert status == 200
    assert result["NodeNames"] == ["gpu-1", "gpu-2", "cpu-1"]
    assert result["Error"] == ""
    status, ranked = call(server.url, "/scheduler/v1/east/prioritize", body, "good")
    # gpu-2 scores as well as gpu-1 by the policy (9), the one chosen gets 10, cpu-1 is not gpucloud's (0)
    assert status == 200
    assert sorted(h["Score"] for h in ranked) == [0, 9, 10]


@pytest.mark.parametrize(
    ("path", "body", "token", "status"),
    [
        ("/scheduler/v1/east/filter", b"{}", None, 401),
        ("/scheduler/v1/east/filter", b"{}", "bad", 401),
        ("/scheduler/v1/west/filter", b"{}", "good", 404),
        ("/scheduler/v1/east/bind", b"{}", "good", 404),
        ("/somewhere/else", b"{}", "good", 404),
        ("/scheduler/v1/east/filter", b"\xff\xfe", "good", 400),
        ("/scheduler/v1/east/filter", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "x"}', "good", 400),
        ("/scheduler/v1/warming/filter", b"{}", "good", 503),
    ],
)
def test_every_refusal_is_a_quick_4xx_or_503_never_a_500(server, path, body, token, status):
    start = time.monotonic()
    code, answer = call(server.url, path, body, token)
    assert code == status
    assert answer["Error"]
    assert time.monotonic() - start < 1


def test_a_feed_lists_the_clusters_pods_then_follows_its_watch(cluster: RunningEmulator):
    cluster.put_object(pod("running", 4, "gpu-1"))
    cluster.put_object(pod("done", 8, "gpu-2", phase="Succeeded"))
    cluster.put_object(pod("pending", 1))
    feed = ClusterFeed(KubeApi(api_client_for_url(cluster.url), FAST), watch_seconds=2)
    nodes = feed.nodes()
    assert [(n.name, n.gpus, n.model, n.cpu_milli) for n in nodes] == [
        ("gpu-1", 8, "NVIDIA-H100", 96_000),
        ("gpu-2", 8, "NVIDIA-H100", 96_000),
    ]
    extender = Extender(nodes)
    version = feed.list_pass(extender)
    assert {k: p.node for k, p in extender.fleet.placements().items()} == {"team/running": "gpu-1"}
    stop = threading.Event()
    watcher = threading.Thread(target=feed.watch, args=(extender, version, stop))
    watcher.start()
    cluster.put_object(pod("pending", 1, "gpu-2"))  # the scheduler bound it
    cluster.remove_object("v1", "Pod", "running", "team")
    watcher.join(timeout=5)
    assert {k: p.node for k, p in extender.fleet.placements().items()} == {"team/pending": "gpu-2"}
    assert feed.events == 2


def test_a_placement_the_extender_assumed_is_confirmed_by_the_watch(cluster: RunningEmulator):
    feed = ClusterFeed(KubeApi(api_client_for_url(cluster.url), FAST), watch_seconds=1)
    now = [0.0]
    extender = Extender(feed.nodes(), assume_seconds=0.5, clock=lambda: now[0])
    version = feed.list_pass(extender)
    ranked = extender.prioritize({"Pod": pod("job", 8), "NodeNames": ["gpu-1", "gpu-2"]})
    chosen = next(h["Host"] for h in ranked if h["Score"] == 10)
    cluster.put_object(pod("job", 8, chosen))  # kube-scheduler bound it where the extender said
    feed.watch(extender, version, threading.Event())
    now[0] = 0.6  # past the assumption's lapse: only the cluster's word keeps it now
    extender.filter({"Pod": pod("next", 1), "NodeNames": ["gpu-1"]})
    assert extender.fleet.placements()["team/job"].node == chosen


def test_the_extender_keeps_answering_from_its_last_state_when_the_cluster_goes_away(cluster, server):
    feed = ClusterFeed(KubeApi(api_client_for_url(cluster.url), FAST), watch_seconds=1)
    extender = Extender(feed.nodes())
    feed.list_pass(extender)
    cluster.stop()
    stop = threading.Event()
    runner = threading.Thread(
        target=feed.run, args=(extender, stop), kwargs={"retry_seconds": 0.1}, daemon=True
    )
    runner.start()
    result = extender.filter({"Pod": pod("p", 8), "NodeNames": ["gpu-1", "gpu-2"]})
    stop.set()
    assert result["NodeNames"] == ["gpu-1", "gpu-2"]


def test_a_list_pass_picks_up_the_tenants_namespace_labels(cluster: RunningEmulator):
    cluster.put_object(render_namespace(make_tenant("alpha"), ClusterProfile()))
    cluster.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-solo"}})
    cluster.put_object(pod("held", 1, "gpu-1", ns="tenant-solo"))
    feed = ClusterFeed(KubeApi(api_client_for_url(cluster.url), FAST), watch_seconds=1)
    extender = Extender(feed.nodes())
    feed.list_pass(extender)
    asked = {"Pod": pod("new", 1, ns="tenant-alpha"), "NodeNames": ["gpu-1", "gpu-2"]}
    assert extender.filter(asked)["NodeNames"] == ["gpu-1", "gpu-2"]  # tenant-solo is no tenant's yet
    cluster.put_object(
        render_namespace(
            make_tenant("solo", trust_tier="isolated", namespace="tenant-solo"), ClusterProfile()
        )
    )
    feed.list_pass(extender)
    assert extender.namespaces == {
        "tenant-alpha": ("alpha", Tier.STANDARD),
        "tenant-solo": ("solo", Tier.ISOLATED),
    }
    result = extender.filter(asked)
    assert result["NodeNames"] == ["gpu-2"]
    assert result["FailedAndUnresolvableNodes"] == {}
    assert result["FailedNodes"] == {"gpu-1": "node runs pods of an isolated tenant"}


@pytest.mark.parametrize(
    ("labels", "owner"),
    [
        ({"gpucloud.io/tenant": "acme", "gpucloud.io/trust-tier": "trusted"}, ("acme", Tier.TRUSTED)),
        ({"gpucloud.io/tenant": "acme"}, ("acme", Tier.STANDARD)),  # no tier: no sharing across tenants
        ({"gpucloud.io/tenant": "acme", "gpucloud.io/trust-tier": "gold"}, ("acme", Tier.STANDARD)),
        ({"gpucloud.io/tenant": "gpucloud.shared"}, None),  # objects several tenants need: nobody's
        ({"gpucloud.io/trust-tier": "isolated"}, None),
    ],
)
def test_a_namespace_belongs_to_the_tenant_its_gpucloud_label_names(labels, owner):
    assert namespace_tenant({"metadata": {"name": "ns", "labels": labels}}) == owner


def test_a_list_pass_reads_mig_instances_from_allocatable_less_the_bound_mig_pods(cluster: RunningEmulator):
    cluster.put_object(gpu_node("gpu-2", mig=f"{MIG_1G}=2"))
    cluster.put_object(pod("one", 1, "gpu-2", resource=MIG_1G))
    feed = ClusterFeed(KubeApi(api_client_for_url(cluster.url), FAST), watch_seconds=1)
    extender = Extender(feed.nodes())
    feed.list_pass(extender)
    asked = {"Pod": pod("new", 1, resource=MIG_1G), "NodeNames": ["gpu-1", "gpu-2", "cpu-1"]}
    result = extender.filter(asked)
    assert result["NodeNames"] == ["gpu-2", "cpu-1"]
    assert result["FailedNodes"] == {"gpu-1": f"no free {MIG_1G} instance"}
    cluster.put_object(pod("two", 1, "gpu-2", resource=MIG_1G))  # the second of gpu-2's two
    cluster.put_object(gpu_node("gpu-1", mig=f"{MIG_1G}=1"))  # the MIG manager laid out gpu-1
    feed.list_pass(extender)
    assert extender.filter(asked)["NodeNames"] == ["gpu-1", "cpu-1"]


def _documented_config() -> dict[str, Any]:
    text = DOCS.read_text()
    block = re.search(r"```yaml\n(apiVersion: kubescheduler\.config\.k8s\.io/v1\n.*?)```", text, re.S)
    assert block, "docs/placement.md must show the KubeSchedulerConfiguration"
    config: dict[str, Any] = yaml.safe_load(block.group(1))
    return config


def test_the_documented_scheduler_configuration_fails_open_and_matches_the_server():
    config = _documented_config()
    assert config["kind"] == "KubeSchedulerConfiguration"
    (extender,) = config["extenders"]
    assert extender["ignorable"] is True  # gpucloud slow or down: kube-scheduler goes on without it
    assert extender["nodeCacheCapable"] is True  # NodeNames, which the extender requires
    assert extender["filterVerb"] == "filter"
    assert extender["prioritizeVerb"] == "prioritize"
    assert extender.get("bindVerb", "") == ""  # the cluster binds; the extender only advises
    assert re.search(r"/scheduler/v1/[a-z0-9-]+$", extender["urlPrefix"])
    assert extender["weight"] > 0
    assert extender["httpTimeout"]


def test_a_slow_extender_is_cut_off_by_the_documented_timeout(cluster):
    """What kube-scheduler does with `httpTimeout`: a call past it is an error, ignored when ignorable."""
    timeout = float(_documented_config()["extenders"][0]["httpTimeout"].removesuffix("s"))
    release = threading.Event()
    slow = Extender([NodeSpec("gpu-1", 96_000, 1_000_000, 8, "H100")])

    def resolve(name: str) -> Extender:
        release.wait(timeout + 1)  # gpucloud stuck on something
        return slow

    srv = ExtenderServer(("127.0.0.1", 0), resolve, lambda token: True)
    srv.start()
    host, port = srv.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    conn.request(
        "POST", "/scheduler/v1/east/filter", args(pod("p", 1), ["gpu-1"]), {"Authorization": "Bearer x"}
    )
    with pytest.raises(TimeoutError):
        conn.getresponse()
    release.set()
    srv.shutdown()
    srv.server_close()


@pytest.mark.django_db(transaction=True)
def test_the_registry_serves_a_registered_cluster_to_a_platform_administrators_token(
    cluster, admin, make_user
):
    HostCluster.objects.create(
        name="east",
        driver=HostCluster.Driver.KUBERNETES,
        kubeconfig_ciphertext=crypto.encrypt(kubeconfig_for(cluster.url)),
    )
    _, admin_token = create_token(actor=Actor.of(admin), user=admin, name="kube-scheduler")
    alice = make_user("alice")
    _, alice_token = create_token(actor=Actor.of(alice), user=alice, name="mine")
    registry = Registry(watch_seconds=1)
    try:
        assert registry.authorize(admin_token)
        assert not registry.authorize(alice_token)
        assert not registry.authorize("gpc_nonsense")
        assert registry.resolve("nowhere") is None
        with pytest.raises(NotReady):
            registry.resolve("east")
        deadline = time.monotonic() + 5
        while registry.clusters["east"].extender is None and time.monotonic() < deadline:
            time.sleep(0.05)
        extender = registry.resolve("east")
        assert extender is not None
        assert sorted(extender.fleet.names) == ["gpu-1", "gpu-2"]
    finally:
        registry.stop(wait=5)


def _certificates(tmp_path: Path) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (kube-scheduler's), as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    files: dict[str, str] = {}

    def issue(name: str, issuer: Any, issuer_key: Any, ca: bool, san: Any = None) -> tuple[Any, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer or subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        cert = builder.sign(issuer_key or key, hashes.SHA256())
        for suffix, data in (
            ("crt", cert.public_bytes(serialization.Encoding.PEM)),
            (
                "key",
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ),
            ),
        ):
            (tmp_path / f"{name}.{suffix}").write_bytes(data)
            files[f"{name}.{suffix}"] = str(tmp_path / f"{name}.{suffix}")
        return cert, key

    ca, ca_key = issue("ca", None, None, True)
    issue("server", ca.subject, ca_key, False, [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    issue("scheduler", ca.subject, ca_key, False)
    return files


def test_with_a_client_ca_only_kube_schedulers_certificate_gets_in(tmp_path):
    import ssl

    files = _certificates(tmp_path)
    extender = Extender([NodeSpec("gpu-1", 96_000, 1_000_000, 8, "H100")])
    srv = ExtenderServer(("127.0.0.1", 0), lambda name: extender, lambda token: False)
    srv.use_tls(files["server.crt"], files["server.key"], files["ca.crt"])
    srv.start()
    port = srv.server_address[1]
    try:
        context = ssl.create_default_context(cafile=files["ca.crt"])
        context.load_cert_chain(files["scheduler.crt"], files["scheduler.key"])
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
        conn.request("POST", "/scheduler/v1/east/filter", args(pod("p", 1), ["gpu-1"]))
        response = conn.getresponse()
        assert response.status == 200
        assert json.loads(response.read())["NodeNames"] == ["gpu-1"]
        stranger = http.client.HTTPSConnection(
            "127.0.0.1", port, context=ssl.create_default_context(cafile=files["ca.crt"]), timeout=5
        )

        def ask_as_stranger() -> None:
            stranger.request("POST", "/scheduler/v1/east/filter", args(pod("p", 1), ["gpu-1"]))
            stranger.getresponse()

        # Refused on the request or, as TLS 1.3 checks the client's certificate late, on the answer.
        with pytest.raises((ssl.SSLError, ConnectionError)):
            ask_as_stranger()
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_command_refuses_a_bad_address_or_half_a_tls_pair(db):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="host:port"):
        call_command("serve_extender", "--bind", "nowhere")
    with pytest.raises(CommandError, match="go together"):
        call_command("serve_extender", "--bind", "127.0.0.1:0", "--tls-cert", "x.pem")


def test_the_health_port_answers_healthz_and_serves_no_verb():
    from placement.extender.http import HealthServer

    srv = HealthServer(("127.0.0.1", 0))
    srv.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=5)
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        assert response.status == 200
        assert json.loads(response.read()) == {"status": "ok"}
        conn.request("GET", "/readyz")
        response = conn.getresponse()
        assert response.status == 404
        assert "/healthz only" in response.read().decode()
        conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=5)
        conn.request("POST", "/scheduler/v1/east/filter", args(pod("p", 1), ["gpu-1"]))
        assert conn.getresponse().status == 404
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def tls_server(tmp_path: Path) -> Any:
    """The extender on TLS with kube-scheduler's CA, and a client holding kube-scheduler's certificate."""
    import ssl

    files = _certificates(tmp_path)
    extender = Extender([NodeSpec("gpu-1", 96_000, 1_000_000, 8, "H100")])
    srv: Any = ExtenderServer(("127.0.0.1", 0), lambda name: extender, lambda token: False, max_connections=4)
    srv.use_tls(files["server.crt"], files["server.key"], files["ca.crt"])
    srv.start()
    context = ssl.create_default_context(cafile=files["ca.crt"])
    context.load_cert_chain(files["scheduler.crt"], files["scheduler.key"])
    srv.scheduler_tls = context
    yield srv
    srv.shutdown()
    srv.server_close()


def scheduler_call(srv: Any, timeout: float = 3) -> int:
    """kube-scheduler's filter call on a new connection; its status."""
    port = srv.server_address[1]
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=srv.scheduler_tls, timeout=timeout)
    try:
        conn.request("POST", "/scheduler/v1/east/filter", args(pod("p", 1), ["gpu-1"]))
        return conn.getresponse().status
    finally:
        conn.close()


def test_an_idle_connection_to_the_tls_port_holds_up_no_call_of_kube_scheduler(tls_server):
    idle = socket.create_connection(("127.0.0.1", tls_server.server_address[1]))  # never says hello
    try:
        started = time.monotonic()
        assert scheduler_call(tls_server) == 200
        assert time.monotonic() - started < 2
    finally:
        idle.close()


def test_connections_beyond_the_bound_are_closed_and_idle_ones_are_let_go_after_the_handshake_timeout(
    tls_server, monkeypatch
):
    import placement.extender.http as extender_http

    monkeypatch.setattr(extender_http, "HANDSHAKE_TIMEOUT", 1.0)
    idle = [socket.create_connection(("127.0.0.1", tls_server.server_address[1])) for _ in range(4)]
    try:
        one_more = socket.create_connection(("127.0.0.1", tls_server.server_address[1]), timeout=3)
        assert one_more.recv(1) == b""  # closed at once: four are served already
        for sock in idle:  # each is closed by the server once its handshake is overdue
            sock.settimeout(5)
            assert sock.recv(1) == b""
        assert scheduler_call(tls_server) == 200
    finally:
        for sock in idle:
            sock.close()


@pytest.mark.parametrize(
    ("headers", "body", "reason"),
    [
        ({"Content-Length": "ten"}, b"", "Content-Length must be a whole number"),
        ({"Content-Length": "-5"}, b"", "Content-Length must be a whole number"),
        (
            {},
            args(
                pod("p", 1)
                | {
                    "spec": {
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [["x"]]
                                }
                            }
                        }
                    }
                },
                ["gpu-1"],
            ),
            "nodeSelectorTerms[0] must be an object",
        ),
        (
            {},
            args(
                pod("p", 1) | {"spec": {"containers": [{"resources": {"requests": {"cpu": "1e999999999"}}}]}},
                ["gpu-1"],
            ),
            "'1e999999999' is not a quantity",
        ),
    ],
    ids=[
        "content-length-not-a-number",
        "content-length-negative",
        "term-not-an-object",
        "quantity-overflows",
    ],
)
def test_malformed_extender_args_are_a_400_saying_what_is_wrong(server, headers, body, reason):
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.putrequest("POST", "/scheduler/v1/east/filter")
    for name, value in ({"Authorization": "Bearer good", "Content-Length": str(len(body))} | headers).items():
        conn.putheader(name, value)
    conn.endheaders(body)
    response = conn.getresponse()
    assert response.status == 400
    assert reason in json.loads(response.read())["Error"]
