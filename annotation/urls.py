from django.urls import path

from annotation import views

urlpatterns = [
    path("", views.home, name="home"),
    path("settings/", views.preferences, name="preferences"),
    path("studies/", views.study_list, name="study_list"),
    path("studies/example_pairs.csv", views.example_pairs_file, name="example_pairs_file"),
    path("studies/<slug:slug>/", views.study_detail, name="study_detail"),
    path("studies/<slug:slug>/import/", views.study_import, name="study_import"),
    path("studies/<slug:slug>/rewrites/", views.study_import_rewrites, name="study_import_rewrites"),
    path("studies/<slug:slug>/sample/", views.study_sample, name="study_sample"),
    path("studies/<slug:slug>/guide/", views.study_guide, name="study_guide"),
    path("studies/<slug:slug>/practice/import/", views.study_practice_import, name="study_practice_import"),
    path("studies/<slug:slug>/practice/settings/", views.study_practice_settings, name="study_practice_settings"),
    path("studies/<slug:slug>/practice/skip/", views.study_practice_skip, name="study_practice_skip"),
    path("studies/<slug:slug>/undo-window/", views.study_undo_window, name="study_undo_window"),
    path("studies/<slug:slug>/margins/", views.study_margins, name="study_margins"),
    path("read/", views.reader_home, name="reader_home"),
    path("read/undo/", views.reading_undo, name="reading_undo"),
    path("read/<slug:slug>/guide/", views.reader_guide, name="reader_guide"),
    path("read/<slug:slug>/<str:task>/practice/", views.practice_next, name="practice_next"),
    path("read/p/<uuid:attempt_id>/", views.practice_page, name="practice_page"),
    path("people/locked/", views.locked_logins, name="locked_logins"),
    path("read/<slug:slug>/<str:task>/next/", views.reading_next, name="reading_next"),
    path("read/a/<uuid:assignment_id>/", views.reading_page, name="reading_page"),
    path("adjudicate/<uuid:adjudication_id>/", views.adjudication_page, name="adjudication_page"),
    path("adjudicate/<slug:slug>/next/", views.adjudication_next, name="adjudication_next"),
]
