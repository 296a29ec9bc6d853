"""Root URLs. Each app owns its pages (urls.py) and its API (api_urls.py)."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("console.pages_urls")),
    path("", include("approvals.urls")),
    path("runs/", include("agents.urls")),
    path("audit/", include("audit.urls")),
    path("api/", include("console.api_urls")),
    path("api/", include("approvals.api_urls")),
    path("api/", include("agents.api_urls")),
    path("api/", include("audit.api_urls")),
]
