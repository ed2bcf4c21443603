from django.urls import path

from cbweb.platforms import views

app_name = "platforms"

urlpatterns = [
    path("", views.platform_list, name="list"),
    path("compare/", views.platform_compare, name="compare"),
    path("<int:pk>/", views.platform_detail, name="detail"),
]
