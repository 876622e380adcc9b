"""The reader's and the adjudicator's pages."""

from django.urls import path

from reading import views

urlpatterns = [
    path("read/", views.reader_home, name="reader_home"),
    path("read/undo/", views.reading_undo, name="reading_undo"),
    path("read/<slug:slug>/guide/", views.reader_guide, name="reader_guide"),
    path("read/<slug:slug>/<str:task>/practice/", views.practice_next, name="practice_next"),
    path("read/p/<uuid:attempt_id>/", views.practice_page, name="practice_page"),
    path("read/<slug:slug>/<str:task>/next/", views.reading_next, name="reading_next"),
    path("read/a/<uuid:assignment_id>/", views.reading_page, name="reading_page"),
    path("adjudicate/<uuid:adjudication_id>/", views.adjudication_page, name="adjudication_page"),
    path("adjudicate/<slug:slug>/next/", views.adjudication_next, name="adjudication_next"),
]
