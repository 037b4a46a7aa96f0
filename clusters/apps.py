from django.apps import AppConfig


class ClustersConfig(AppConfig):
    """Host clusters and what gpucloud renders onto them. Its label stays `workers`, the name the app had when
    its tables were made (`workers_passrequest`, …) and the name its migrations are recorded under."""

    name = "clusters"
    label = "workers"
    verbose_name = "Host clusters"

    def ready(self) -> None:
        from clusters import tasks  # noqa: F401  (registers the tasks)
