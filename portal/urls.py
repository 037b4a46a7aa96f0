from django.urls import path

from portal import sso
from portal.views import (
    audit,
    auth,
    capacity,
    dashboard,
    fleet,
    invoices,
    members,
    quotas,
    tenants,
    tokens,
    usage,
    users,
    workloads,
)

app_name = "portal"
urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("login/", auth.LoginView.as_view(), name="login"),
    path("logout/", sso.Logout.as_view(), name="logout"),
    # Before <slug>/: "new" is a page, not a tenant.
    path("tenants/new/", tenants.tenant_create, name="tenant-create"),
    path("tenants/<slug:slug>/", tenants.tenant_detail, name="tenant-detail"),
    path("tenants/<slug:slug>/status/", tenants.tenant_status, name="tenant-status"),
    path("tenants/<slug:slug>/kubeconfig/", tenants.kubeconfig, name="tenant-kubeconfig"),
    path("tenants/<slug:slug>/suspend/", tenants.tenant_suspend, name="tenant-suspend"),
    path("tenants/<slug:slug>/resume/", tenants.tenant_resume, name="tenant-resume"),
    path("tenants/<slug:slug>/delete/", tenants.tenant_delete, name="tenant-delete"),
    path("tenants/<slug:slug>/quotas/", quotas.quotas, name="tenant-quotas"),
    path(
        "tenants/<slug:slug>/quotas/<str:gpu_class>/remove/",
        quotas.quota_remove,
        name="tenant-quota-remove",
    ),
    path("tenants/<slug:slug>/members/", members.members, name="tenant-members"),
    path(
        "tenants/<slug:slug>/invitations/<int:invitation_id>/cancel/",
        members.invitation_cancel,
        name="tenant-invitation-cancel",
    ),
    path("tenants/<slug:slug>/members/<str:username>/role/", members.member_role, name="tenant-member-role"),
    path(
        "tenants/<slug:slug>/members/<str:username>/remove/",
        members.member_remove,
        name="tenant-member-remove",
    ),
    path("tenants/<slug:slug>/usage/", usage.usage, name="tenant-usage"),
    path("tenants/<slug:slug>/usage/focus/<str:month>/", usage.focus, name="tenant-usage-focus"),
    path("tenants/<slug:slug>/workloads/", workloads.workloads, name="tenant-workloads"),
    path("tenants/<slug:slug>/invoices/", invoices.invoices, name="tenant-invoices"),
    path("tenants/<slug:slug>/invoices/draft/", invoices.draft, name="tenant-invoice-draft"),
    path("tenants/<slug:slug>/invoices/<str:invoice_id>/", invoices.invoice, name="tenant-invoice"),
    path("tenants/<slug:slug>/invoices/<str:invoice_id>/issue/", invoices.issue, name="tenant-invoice-issue"),
    path(
        "tenants/<slug:slug>/invoices/<str:invoice_id>/<str:what>.csv",
        invoices.download,
        name="tenant-invoice-download",
    ),
    path("tenants/<slug:slug>/tokens/", tokens.service_tokens, name="tenant-tokens"),
    path("tenants/<slug:slug>/audit/", audit.tenant_audit, name="tenant-audit"),
    path("account/tokens/", tokens.personal_tokens, name="account-tokens"),
    path("tokens/<str:token_id>/revoke/", tokens.revoke, name="token-revoke"),
    path("fleet/", fleet.fleet, name="fleet"),
    path("capacity/", capacity.capacity, name="capacity"),
    path("users/", users.user_list, name="users"),
    path("users/<int:user_id>/", users.user_action, name="user-action"),
]
