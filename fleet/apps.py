from django.apps import AppConfig


class FleetConfig(AppConfig):
    """The fleet inventory. Its label stays `scheduling`, the name the app had when its tables were made
    (`scheduling_hostcluster`, …) and the name its migrations are recorded under."""

    name = "fleet"
    label = "scheduling"
    verbose_name = "Fleet"
