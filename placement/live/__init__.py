"""The live view of every Kubernetes host cluster: its GPU pods as `fleet.Pod` rows (docs/placement.md)."""
