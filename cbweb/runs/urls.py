from django.urls import path

from cbweb.runs import views

app_name = "runs"

urlpatterns = [
    path("", views.run_list, name="list"),
    path("compare/", views.run_compare, name="compare"),
    path("launch/<int:workflow_pk>/", views.run_launch, name="launch"),
    path("history/<int:workflow_pk>/", views.run_history, name="history"),
    path("<int:pk>/", views.run_detail, name="detail"),
    path("<int:pk>/progress/", views.run_progress, name="progress"),
    path("<int:pk>/cancel/", views.run_cancel, name="cancel"),
    path("<int:pk>/delete/", views.run_delete, name="delete"),
    path("<int:pk>/result.json", views.run_result_json, name="result-json"),
    path("<int:pk>/workflow.yml", views.run_workflow_yaml, name="workflow-yaml"),
    path("<int:pk>/files/<path:path>", views.run_file, name="file"),
    path("<int:pk>/bundle.zip", views.run_bundle, name="bundle"),
]
