from django.urls import path

from annotation import views

urlpatterns = [
    path("", views.home, name="home"),
    path("settings/", views.preferences, name="preferences"),
    path("settings/tokens/", views.token_create, name="token_create"),
    path("settings/tokens/<uuid:token_id>/revoke/", views.token_revoke, name="token_revoke"),
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
    path("studies/<slug:slug>/license/", views.study_license, name="study_license"),
    path("people/locked/", views.locked_logins, name="locked_logins"),
    path("people/tokens/", views.api_tokens, name="api_tokens"),
    path("people/tokens/<uuid:token_id>/revoke/", views.api_token_revoke, name="api_token_revoke"),
]
