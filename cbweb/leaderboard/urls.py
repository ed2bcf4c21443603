from django.urls import path

from cbweb.leaderboard import views

app_name = "leaderboard"

urlpatterns = [path("", views.leaderboard, name="index")]
