"""Issue 24 §2: a kubeconfig given to gpucloud never runs a command or reads a file of its server.

Registration over real HTTP, the console command and a kubeconfig stored before the rule: each is refused
naming the field, the `exec` command leaves no marker, and nothing reaches the cluster the file names.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
import requests
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from clusters.reconcile import tenants as reconcile
from clusters.tests.conftest import kubeconfig_for
from core.audit import Actor
from core.models import AuditEvent
from fleet.models import HostCluster
from gpucloud import crypto
from gpucloud.tests.test_kubeconfig import exec_user
from tenants.tokens import create_token


def kubeconfig_with(url: str, user: dict[str, Any]) -> str:
    document = yaml.safe_load(kubeconfig_for(url))
    document["users"][0]["user"] = user
    return yaml.safe_dump(document)


@pytest.fixture
def register(live_server, admin, gpu_catalog):
    """POST /api/v1/host-clusters/ over real HTTP as a platform administrator."""
    _, token = create_token(actor=Actor.system("test"), user=admin, name="ci", scope="admin")

    def post(kubeconfig: str) -> requests.Response:
        return requests.post(
            f"{live_server.url}/api/v1/host-clusters/",
            json={"name": "gpu-east", "kubeconfig": kubeconfig, "scheduler": "kueue"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )

    return post


def test_registration_refuses_an_exec_command_and_runs_nothing(register, kube_emulator, tmp_path):
    marker = tmp_path / "exec-ran"

    answer = register(kubeconfig_with(kube_emulator.url, exec_user(marker)))

    assert answer.status_code == 422, answer.text
    assert answer.headers["Content-Type"] == "application/problem+json"
    body = answer.json()
    assert body["type"] == "/problems/kubeconfig-refused"
    assert "runs a command" in body["errors"]["kubeconfig.users[0].user.exec"][0]
    assert not marker.exists()
    assert kube_emulator.calls == 0
    assert not HostCluster.objects.filter(name="gpu-east").exists()


def test_registration_reads_no_token_file_and_sends_nothing_to_the_cluster(register, kube_emulator, tmp_path):
    secret = tmp_path / "token"
    secret.write_text("a-secret-of-the-server")

    answer = register(kubeconfig_with(kube_emulator.url, {"tokenFile": str(secret)}))

    assert answer.status_code == 422, answer.text
    errors = answer.json()["errors"]
    assert list(errors) == ["kubeconfig.users[0].user.tokenFile"]
    assert "put the token itself in `token`" in errors["kubeconfig.users[0].user.tokenFile"][0]
    assert "a-secret-of-the-server" not in answer.text
    assert kube_emulator.calls == 0  # the file's content was never sent as a bearer token
    assert not AuditEvent.objects.filter(action="host_cluster.register").exists()


@pytest.mark.parametrize(
    ("where", "key"),
    [("user", "client-certificate"), ("user", "client-key"), ("cluster", "certificate-authority")],
)
def test_registration_refuses_certificate_and_ca_paths(register, kube_emulator, where, key):
    document = yaml.safe_load(kubeconfig_for(kube_emulator.url))
    document[f"{where}s"][0][where][key] = "/etc/ssl/certs/ca-certificates.crt"

    answer = register(yaml.safe_dump(document))

    assert answer.status_code == 422, answer.text
    assert f"kubeconfig.{where}s[0].{where}.{key}" in answer.json()["errors"]
    assert kube_emulator.calls == 0


def test_registration_refuses_an_auth_provider_plugin(register, kube_emulator, tmp_path):
    marker = tmp_path / "gcp-ran"
    provider = {"name": "gcp", "config": {"cmd-path": f"touch {marker}", "cmd-args": ""}}

    answer = register(kubeconfig_with(kube_emulator.url, {"auth-provider": provider}))

    assert answer.status_code == 422, answer.text
    assert "kubeconfig.users[0].user.auth-provider" in answer.json()["errors"]
    assert not marker.exists()


def test_the_console_command_refuses_the_same_kubeconfig(kube_emulator, gpu_catalog, tmp_path):
    marker = tmp_path / "exec-ran"
    path = tmp_path / "gpu-east.yaml"
    path.write_text(kubeconfig_with(kube_emulator.url, exec_user(marker)))

    with pytest.raises(CommandError, match=r"kubeconfig\.users\[0\]\.user\.exec runs a command"):
        call_command(
            "add_host_cluster",
            "gpu-east",
            "--kubeconfig",
            str(path),
            "--scheduler",
            "kueue",
            stdout=io.StringIO(),
        )

    assert not marker.exists()
    assert not HostCluster.objects.exists()


def test_a_kubeconfig_stored_before_the_rule_marks_the_host_cluster_and_runs_nothing(
    register, kube_emulator, tmp_path
):
    assert register(kubeconfig_for(kube_emulator.url)).status_code == 201
    host = HostCluster.objects.get(name="gpu-east")
    marker = tmp_path / "exec-ran"
    host.kubeconfig_ciphertext = crypto.encrypt(kubeconfig_with(kube_emulator.url, exec_user(marker)))
    host.save(update_fields=["kubeconfig_ciphertext"])
    calls = kube_emulator.calls

    reconcile.reconcile_host_cluster(host)

    host.refresh_from_db()
    assert host.state == "error"
    assert "the stored kubeconfig is refused: kubeconfig.users[0].user.exec" in host.status_message
    assert not marker.exists()
    assert kube_emulator.calls == calls
