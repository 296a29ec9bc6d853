from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from console.api import ApiDocsView, MetricsApi, TokenListApi, TokenObtainApi, TokenRevokeApi
from console.autonomy_api import AutonomyAdviceApi

urlpatterns = [
    path("auth/token/", TokenObtainApi.as_view(), name="api-token"),
    path("auth/tokens/", TokenListApi.as_view(), name="api-tokens"),
    path("auth/tokens/<str:token_key>/", TokenRevokeApi.as_view(), name="api-token-revoke"),
    path("metrics/", MetricsApi.as_view(), name="api-metrics"),
    path("autonomy/advice/", AutonomyAdviceApi.as_view(), name="api-autonomy-advice"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "docs/",
        ApiDocsView.as_view(url_name="api-schema", template_name="console/api_docs.html"),
        name="api-docs",
    ),
]
