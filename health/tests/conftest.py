"""The health pass talks to a host cluster: the Kubernetes emulator of the clusters' tests serves it."""

from clusters.tests.conftest import kube_emulator  # noqa: F401  (a fixture, used by name)
