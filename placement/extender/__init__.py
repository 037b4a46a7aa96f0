"""The kube-scheduler extender gpucloud serves: HTTP server, host-cluster feed, process.

See docs/placement.md ("The scheduler extender"). A v1.Pod as the engine reads it is `pods`; the stateful
extender (the engine of one host cluster, filter and prioritize, assumed and observed pods) is `state`; the
wire (bodies in, JSON out) and the HTTP server are `http`; the host cluster's nodes and pods are `feed`; the
process is `service`, the only one that touches Django.
"""
