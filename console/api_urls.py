from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from console.api import MetricsApi, TokenListApi, TokenObtainApi, TokenRevokeApi

urlpatterns = [
    path("auth/token/", TokenObtainApi.as_view(), name="api-token"),
    path("auth/tokens/", TokenListApi.as_view(), name="api-tokens"),
    path("auth/tokens/<str:token_key>/", TokenRevokeApi.as_view(), name="api-token-revoke"),
    path("metrics/", MetricsApi.as_view(), name="api-metrics"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its setup script from its own URL (?script): no inline script, so
    # the page works under the console's Content-Security-Policy.
    path(
        "docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="api-schema", template_name="console/api_docs.html"
        ),
        name="api-docs",
    ),
]
