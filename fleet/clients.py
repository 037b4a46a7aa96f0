"""A Kubernetes client for a registered host cluster, from its stored (encrypted) kubeconfig."""

from __future__ import annotations

from kubernetes import client

from fleet.models import HostCluster
from gpucloud import crypto
from gpucloud.kube.api import api_client_from_kubeconfig
from gpucloud.kube.errors import PermanentDriverError
from gpucloud.kubeconfig import KubeconfigRefused


def api_client_of(host_cluster: HostCluster) -> client.ApiClient:
    """A client for the host cluster from its stored kubeconfig. One stored before gpucloud refused `exec`
    and file paths is refused now (a permanent error: the cluster is marked, nothing runs)."""
    try:
        return api_client_from_kubeconfig(crypto.decrypt(host_cluster.kubeconfig_ciphertext))
    except KubeconfigRefused as exc:
        raise PermanentDriverError(
            f"the stored kubeconfig is refused: {exc.detail}; register the cluster again with inline "
            "credentials"
        ) from None
