from django.urls import path

from cbweb.workflows import views

app_name = "workflows"

urlpatterns = [
    path("", views.workflow_list, name="list"),
    path("new/", views.workflow_new, name="new"),
    path("preview/", views.workflow_preview, name="preview"),
    path("<int:pk>/", views.workflow_detail, name="detail"),
    path("<int:pk>/v/<int:number>/", views.workflow_detail, name="version"),
    path("<int:pk>/diff/", views.workflow_diff, name="diff"),
    path("<int:pk>/v/<int:number>/yaml/", views.workflow_yaml, name="yaml"),
    path("<int:pk>/edit/", views.workflow_edit, name="edit"),
    path("<int:pk>/delete/", views.workflow_delete, name="delete"),
    path("<int:pk>/archive/", views.workflow_archive, name="archive"),
]
