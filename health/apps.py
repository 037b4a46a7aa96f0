from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "health"
    verbose_name = "GPU and node health"

    def ready(self) -> None:
        from health import tasks  # noqa: F401  (registers the tasks)
