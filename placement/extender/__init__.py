"""The kube-scheduler extender gpucloud serves: HTTP server, host-cluster feed, process.

See docs/placement.md ("The scheduler extender"). The protocol and the scoring are the engine's
(`placement.extender.state`); this package adds transport, authentication and fleet state from the cluster.
"""
