"""Every route of REST API v1."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from billing.api.views import (
    BudgetViewSet,
    CollectionSourceViewSet,
    FeasibilityView,
    InvoiceViewSet,
    RateCardViewSet,
    ScrapeRecordViewSet,
    StandingView,
    UsageViewSet,
)
from billing.selectors import credited_events
from clusters.api.views import (
    AdminKubeconfigView,
    HostClusterViewSet,
    KubeconfigView,
    TenantQueueView,
    waiting_ahead,
)
from gitops.api.views import ApplyViewSet, GitSourceViewSet, SchemaViewSet
from health.api.views import HealthEventViewSet
from inference.api.views import InferenceEndpointViewSet, InferenceKeyViewSet
from placement.api.views import CapacityViewSet, GpuClassViewSet, WhatIfViewSet
from tenants.api.views import (
    AuditEventViewSet,
    MemberViewSet,
    QuotaViewSet,
    ScimTokenViewSet,
    ServiceTokenViewSet,
    TenantViewSet,
    TokenViewSet,
)

router = SimpleRouter()
router.register("tenants", TenantViewSet, basename="tenant")
router.register("gpu-classes", GpuClassViewSet, basename="gpu-class")
router.register("host-clusters", HostClusterViewSet, basename="host-cluster")
router.register("fleet/capacity", CapacityViewSet, basename="capacity")
router.register("fleet/what-if", WhatIfViewSet, basename="what-if")
router.register("audit-events", AuditEventViewSet, basename="audit-event")
router.register("tokens", TokenViewSet, basename="token")
router.register("scim/tokens", ScimTokenViewSet, basename="scim-token")
router.register("usage", UsageViewSet, basename="usage")
router.register("rate-cards", RateCardViewSet, basename="rate-card")
router.register("invoices", InvoiceViewSet, basename="invoice")
router.register("budgets", BudgetViewSet, basename="budget")
router.register("metering/sources", CollectionSourceViewSet, basename="metering-source")
router.register("metering/scrapes", ScrapeRecordViewSet, basename="metering-scrape")
# Who sees which health event is billing's to say (the credits); health sits below billing (health.api.views).
router.register(
    "health-events", HealthEventViewSet.seen_by_tenants_as(credited_events), basename="health-event"
)
router.register("schemas", SchemaViewSet, basename="schema")
router.register("apply", ApplyViewSet, basename="apply")
router.register("gitops/sources", GitSourceViewSet, basename="gitops-source")

tenant_router = SimpleRouter()
tenant_router.register("members", MemberViewSet, basename="member")
tenant_router.register("quotas", QuotaViewSet, basename="quota")
tenant_router.register("tokens", ServiceTokenViewSet, basename="service-token")
tenant_router.register("inference-endpoints", InferenceEndpointViewSet, basename="inference-endpoint")
tenant_router.register("inference-keys", InferenceKeyViewSet, basename="inference-key")

urlpatterns = [
    path("", include(router.urls)),
    path("tenants/<slug:tenant_slug>/", include(tenant_router.urls)),
    path(
        "tenants/<slug:tenant_slug>/kubeconfig/",
        KubeconfigView.as_view({"get": "retrieve"}),
        name="tenant-kubeconfig",
    ),
    path(
        "tenants/<slug:tenant_slug>/kubeconfig/admin/",
        AdminKubeconfigView.as_view({"get": "retrieve"}),
        name="tenant-kubeconfig-admin",
    ),
    path(
        "tenants/<slug:tenant_slug>/standing/",
        StandingView.as_view({"get": "retrieve"}),
        name="tenant-standing",
    ),
    path("tenants/<slug:tenant_slug>/queue/", TenantQueueView.as_view({"get": "list"}), name="tenant-queue"),
    path(
        "tenants/<slug:tenant_slug>/feasibility/",
        # The ask goes behind the tenant's waiting workloads, which are clusters' (billing.api.views).
        FeasibilityView.behind(waiting_ahead).as_view({"post": "create"}),
        name="tenant-feasibility",
    ),
]
