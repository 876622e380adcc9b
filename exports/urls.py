from django.urls import path

from exports import views

urlpatterns = [
    path("releases/", views.release_index, name="release_index"),
    path("releases/<uuid:release_id>/download/", views.release_download, name="release_download"),
    path("releases/<uuid:release_id>/retry/", views.release_retry, name="release_retry"),
    path("releases/<uuid:release_id>/delete/", views.release_delete, name="release_delete"),
    path("studies/<slug:slug>/releases/", views.release_list, name="release_list"),
]
