"""The kubeconfig a vCluster writes into the `vc-<name>` secret on its host, read in one place.

`read_admin_kubeconfig` returns it as written (the vCluster's admin credentials: the access pass and the
break-glass download use it); `read_kubeconfig` with its server set to the tenant's external endpoint. Until
the vCluster has written the secret, both raise `KubeconfigNotReady`.

Not a driver: the drivers and the access pass import it, it imports none of them.
"""

from __future__ import annotations

import base64

import yaml
from kubernetes import client

from gpucloud.kube import kinds as k
from gpucloud.kube.api import KubeApi, NotFound, RetryPolicy
from gpucloud.kube.errors import TemporaryDriverError

__all__ = ["KubeconfigNotReady", "read_admin_kubeconfig", "read_kubeconfig", "rewrite_server"]


class KubeconfigNotReady(TemporaryDriverError):
    """The vCluster has not written its kubeconfig secret yet, so it cannot be reached yet."""


def read_admin_kubeconfig(host_api: KubeApi, namespace: str, vcluster: str) -> str:
    """The kubeconfig vCluster wrote into `vc-<name>` (key `config`) on the host, as written."""
    try:
        secret = host_api.get(k.SECRET.path(namespace, f"vc-{vcluster}"))
    except NotFound:
        raise KubeconfigNotReady(f"secret vc-{vcluster} does not exist yet in {namespace}") from None
    encoded = (secret.get("data") or {}).get("config")
    if not encoded:
        raise KubeconfigNotReady(f"secret vc-{vcluster} has no `config` key yet")
    return base64.b64decode(encoded).decode()


def rewrite_server(kubeconfig: str, endpoint: str) -> str:
    """The same kubeconfig with every cluster's server set to the tenant's external endpoint."""
    parsed = yaml.safe_load(kubeconfig) or {}
    for entry in parsed.get("clusters") or []:
        entry.setdefault("cluster", {})["server"] = endpoint
    return yaml.safe_dump(parsed, sort_keys=False)


def read_kubeconfig(
    api_client: client.ApiClient,
    namespace: str,
    vcluster: str,
    endpoint: str,
    *,
    retry: RetryPolicy | None = None,
) -> str:
    """The tenant's kubeconfig from the vCluster secret `vc-<name>`, server rewritten to `endpoint`."""
    return rewrite_server(read_admin_kubeconfig(KubeApi(api_client, retry), namespace, vcluster), endpoint)
