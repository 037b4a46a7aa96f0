"""A kubeconfig is a server and inline credentials: nothing in it is run, and no file it names is read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucloud.kube.api import api_client_from_kubeconfig
from gpucloud.kubeconfig import KubeconfigRefused, check


def kubeconfig(user: dict[str, Any], cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }


def exec_user(marker: Path) -> dict[str, Any]:
    """An exec credential plug-in that leaves `marker` behind when it runs, and answers with a token."""
    status = json.dumps(
        {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "kind": "ExecCredential",
            "status": {"token": "t"},
        }
    )
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "sh",
            "args": ["-c", f"touch {marker}; echo '{status}'"],
        }
    }


def refused_fields(document: Any) -> dict[str, list[str]]:
    with pytest.raises(KubeconfigRefused) as refusal:
        check(document)
    assert refusal.value.status == 422
    return refusal.value.errors


def test_inline_credentials_are_accepted():
    check(kubeconfig({"token": "abc"}, {"server": "https://x", "certificate-authority-data": "Q0E="}))
    check(kubeconfig({"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"}))
    check(
        kubeconfig(
            {"username": "u", "password": "p"}, {"server": "https://x", "insecure-skip-tls-verify": True}
        )
    )


@pytest.mark.parametrize(
    ("section", "key", "value", "says"),
    [
        ("user", "exec", {"command": "id"}, "runs a command"),
        ("user", "auth-provider", {"name": "gcp", "config": {"cmd-path": "id"}}, "runs a plug-in"),
        (
            "user",
            "auth-provider",
            {"name": "oidc", "config": {"idp-issuer-url": "http://x"}},
            "runs a plug-in",
        ),
        ("user", "tokenFile", "/etc/hostname", "put the token itself in `token`"),
        ("user", "client-certificate", "/etc/ssl/cert.pem", "client-certificate-data"),
        ("user", "client-key", "/etc/ssl/key.pem", "client-key-data"),
        ("cluster", "certificate-authority", "/etc/ssl/ca.pem", "certificate-authority-data"),
        ("user", "as", "system:admin", "is not something gpucloud reads"),
    ],
)
def test_commands_plugins_and_file_paths_are_refused_naming_the_field(section, key, value, says):
    user: dict[str, Any] = {"token": "abc"}
    cluster: dict[str, Any] = {"server": "https://x"}
    (user if section == "user" else cluster)[key] = value

    errors = refused_fields(kubeconfig(user, cluster))

    field = f"kubeconfig.{section}s[0].{section}.{key}"
    assert list(errors) == [field]
    assert says in errors[field][0]


def test_every_offending_field_of_every_entry_is_named():
    document = kubeconfig({"token": "a"})
    document["users"].append({"name": "v", "user": {"tokenFile": "/x", "exec": {"command": "id"}}})
    document["clusters"].append(
        {"name": "d", "cluster": {"server": "https://y", "certificate-authority": "/c"}}
    )

    assert sorted(refused_fields(document)) == [
        "kubeconfig.clusters[1].cluster.certificate-authority",
        "kubeconfig.users[1].user.exec",
        "kubeconfig.users[1].user.tokenFile",
    ]


@pytest.mark.parametrize("document", [[], "text", {"users": {"u": {}}}, {"users": [{"name": "u"}]}])
def test_what_is_not_a_kubeconfig_is_refused_and_not_handed_to_the_client(document):
    assert refused_fields(document)


def test_the_one_loader_runs_no_exec_command(tmp_path):
    marker = tmp_path / "exec-ran"

    with pytest.raises(KubeconfigRefused) as refusal:
        api_client_from_kubeconfig(yaml.safe_dump(kubeconfig(exec_user(marker))))

    assert "kubeconfig.users[0].user.exec" in refusal.value.errors
    assert not marker.exists()


def test_the_one_loader_reads_no_token_file(tmp_path):
    secret = tmp_path / "server-secret"
    secret.write_text("read-from-the-servers-disk")
    document = kubeconfig({"tokenFile": str(secret)}, {"server": "http://127.0.0.1:1"})

    with pytest.raises(KubeconfigRefused) as refusal:
        api_client_from_kubeconfig(yaml.safe_dump(document))

    assert "kubeconfig.users[0].user.tokenFile" in refusal.value.errors
    assert "read-from-the-servers-disk" not in str(refusal.value.errors)
