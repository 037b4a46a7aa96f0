from django.urls import path

from portal import sso, views

app_name = "portal"
urlpatterns = [
    path("", views.tenant_list, name="tenant-list"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", sso.Logout.as_view(), name="logout"),
    path("tenants/<slug:slug>/", views.tenant_detail, name="tenant-detail"),
]
