from django.urls import path

from judges import views

urlpatterns = [
    path("studies/<slug:slug>/judges/", views.study_judges, name="study_judges"),
]
