from django.apps import AppConfig


class GitopsConfig(AppConfig):
    name = "gitops"
    verbose_name = "Manifests and GitOps sync"

    def ready(self) -> None:
        from gitops import tasks  # noqa: F401  (registers the tasks)
