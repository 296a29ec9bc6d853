"""Root URLs. Each app owns its pages (urls.py) and its API (api_urls.py)."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from console import ops_views

urlpatterns = [
    # Operations: Prometheus (token or network), liveness, readiness (docs/operations.md).
    path("metrics", ops_views.metrics_scrape, name="prometheus-metrics"),
    path("healthz", ops_views.healthz, name="healthz"),
    path("readyz", ops_views.readyz, name="readyz"),
    # One sign-in page, with its lock-out (console/lockout.py): the admin's sends people there.
    path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    path("admin/", admin.site.urls),
    path("", include("console.pages_urls")),
    path("", include("approvals.urls")),
    path("runs/", include("agents.urls")),
    path("audit/", include("audit.urls")),
    path("api/", include("console.api_urls")),
    path("api/", include("approvals.api_urls")),
    path("api/", include("agents.api_urls")),
    path("api/", include("agents.remote.api_urls")),
    path("api/", include("audit.api_urls")),
]
