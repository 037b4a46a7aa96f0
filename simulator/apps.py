from django.apps import AppConfig


class SimulatorConfig(AppConfig):
    name = "simulator"
    verbose_name = "The embedded default's simulated workloads"

    def ready(self) -> None:
        from simulator import tasks  # noqa: F401  (registers the tasks)
