from csp.decorators import csp_update
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from gpucloud import probes as ops
from portal import sso

urlpatterns = [
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
    path("api/v1/", include("gpucloud.api.urls")),
    path("scim/v2/", include("tenants.scim.urls")),  # identity providers provisioning people (docs/scim.md)
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script as a file: the Content Security Policy needs no inline script.
    # Swagger UI (React) does set inline styles, so this one page allows inline *styles*; scripts stay 'self'.
    path(
        "api/docs/",
        csp_update({"style-src": ["'unsafe-inline'"]})(
            SpectacularSwaggerSplitView.as_view(url_name="schema")
        ),
        name="api-docs",
    ),
    # mozilla-django-oidc's names, so its views and settings find them.
    path("oidc/authenticate/", sso.Start.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", sso.Callback.as_view(), name="oidc_authentication_callback"),
    path("", include("portal.urls")),
]

handler400 = "gpucloud.api.problems.bad_request"
handler404 = "gpucloud.api.problems.not_found"
handler500 = "gpucloud.api.problems.server_error"
