from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from console.api import ApiDocsView, MetricsApi, TokenObtainApi

urlpatterns = [
    path("auth/token/", TokenObtainApi.as_view(), name="api-token"),
    path("metrics/", MetricsApi.as_view(), name="api-metrics"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", ApiDocsView.as_view(url_name="api-schema"), name="api-docs"),
]
