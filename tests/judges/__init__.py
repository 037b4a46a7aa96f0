"""The hostile-tenant suite's judges: one module per layer that enforces something on the host cluster, each
with `judge(pod, world) -> list[str]` (docs: /work/wt/notes/DESIGN26.md, "The hostile-tenant suite")."""
