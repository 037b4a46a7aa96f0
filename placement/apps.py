from django.apps import AppConfig


class PlacementConfig(AppConfig):
    name = "placement"
    verbose_name = "Placement, what-if and the scheduler extender"

    def ready(self) -> None:
        from placement import tasks  # noqa: F401  (registers the tasks)
