from django.urls import path

from cbweb.platforms import views

app_name = "platforms"

urlpatterns = [path("", views.platform_list, name="list")]
