from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"

    def ready(self) -> None:
        from workers import tasks  # noqa: F401  (registers the tasks)
