from django.urls import path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import AllowAny

from cbweb.api import views
from cbweb.api.docs import ApiRedocPage, ApiSwaggerPage

app_name = "api"

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path("docs/", ApiSwaggerPage.as_view(), name="docs"),
    path("redoc/", ApiRedocPage.as_view(), name="redoc"),
    path("workflows/", views.WorkflowListApi.as_view(), name="workflow-list"),
    path("workflows/submit/", views.WorkflowSubmitApi.as_view(), name="workflow-submit"),
    path("workflows/validate/", views.WorkflowValidateApi.as_view(), name="workflow-validate"),
    path("workflows/<int:pk>/", views.WorkflowDetailApi.as_view(), name="workflow-detail"),
    path("workflows/<int:pk>/archive/", views.WorkflowArchiveApi.as_view(), name="workflow-archive"),
    path("runs/", views.RunListApi.as_view(), name="run-list"),
    path("runs/<int:pk>/", views.RunDetailApi.as_view(), name="run-detail"),
    path("runs/<int:pk>/requests/", views.RunRequestsApi.as_view(), name="run-requests"),
    path("runs/<int:pk>/cancel/", views.RunCancelApi.as_view(), name="run-cancel"),
    path("runs/<int:pk>/result/", views.RunResultApi.as_view(), name="run-result"),
    path("runs/<int:pk>/telemetry/", views.RunTelemetryApi.as_view(), name="run-telemetry"),
    path("leaderboard/", views.LeaderboardApi.as_view(), name="leaderboard"),
    path("platforms/", views.PlatformListApi.as_view(), name="platform-list"),
    path("platforms/<int:pk>/", views.PlatformDetailApi.as_view(), name="platform-detail"),
]
