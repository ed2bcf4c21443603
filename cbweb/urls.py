"""URL map: pages per app, the REST API under /api/v1/, the admin, login/logout."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from cbweb.forms import ThrottledAdminAuthenticationForm
from cbweb.views import LoginView, api_tokens, docs_metrics

# The admin logs in through its own view: throttle its failures too.
admin.site.login_form = ThrottledAdminAuthenticationForm

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="workflows:list", permanent=False), name="home"),
    path("workflows/", include("cbweb.workflows.urls")),
    path("runs/", include("cbweb.runs.urls")),
    path("platforms/", include("cbweb.platforms.urls")),
    path("leaderboard/", include("cbweb.leaderboard.urls")),
    path("api/v1/", include("cbweb.api.urls")),
    path("docs/metrics/", docs_metrics, name="docs-metrics"),
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/tokens/", api_tokens, name="api-tokens"),
]

handler400 = "cbweb.views.bad_request"
handler404 = "cbweb.views.not_found"
