from django.urls import path

from analysis import views

urlpatterns = [
    path("studies/<slug:slug>/results/", views.study_results, name="study_results"),
    path("studies/<slug:slug>/results/download/", views.results_download, name="results_download"),
    path("studies/<slug:slug>/results/metric-scores/", views.results_metric_scores, name="results_metric_scores"),
    path(
        "studies/<slug:slug>/results/tables/<str:name>.<str:fmt>",
        views.results_table,
        name="results_table",
    ),
    path(
        "studies/<slug:slug>/results/figures/<str:name>.<str:fmt>",
        views.results_figure,
        name="results_figure",
    ),
]
