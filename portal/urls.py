from django.contrib.auth import views as auth_views
from django.urls import path

from portal import views

app_name = "portal"
urlpatterns = [
    path("", views.tenant_list, name="tenant-list"),
    path("login/", auth_views.LoginView.as_view(template_name="portal/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tenants/<slug:slug>/", views.tenant_detail, name="tenant-detail"),
]
