from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"

    def ready(self) -> None:
        # Registers the bearer scheme with drf-spectacular before any schema is generated.
        from tenants import authentication  # noqa: F401
