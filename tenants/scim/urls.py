"""/scim/v2/…: one view; scim2-server routes within it (RFC 7644 §3.2)."""

from django.urls import re_path

from tenants.scim import views

urlpatterns = [re_path(r"^(?P<path>.*)$", views.scim, name="scim")]
