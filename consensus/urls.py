from django.urls import path

from consensus import views

urlpatterns = [
    path("studies/<slug:slug>/progress/", views.study_progress, name="study_progress"),
    path("studies/<slug:slug>/unrouted/", views.study_unrouted, name="study_unrouted"),
    path("studies/<slug:slug>/readers/", views.study_readers, name="study_readers"),
    path("studies/<slug:slug>/readers/<str:username>/", views.reader_detail, name="reader_detail"),
    path("studies/<slug:slug>/members/", views.study_add_member, name="study_add_member"),
    path("studies/<slug:slug>/assign/", views.study_assign, name="study_assign"),
    path("studies/<slug:slug>/examples/", views.study_examples, name="study_examples"),
    path("studies/<slug:slug>/examples/<uuid:example_id>/", views.example_detail, name="example_detail"),
    path("studies/<slug:slug>/examples/<uuid:example_id>/assign/", views.example_assign, name="example_assign"),
    path(
        "studies/<slug:slug>/assignments/<uuid:assignment_id>/withdraw/",
        views.assignment_withdraw,
        name="assignment_withdraw",
    ),
    path(
        "studies/<slug:slug>/assignments/<uuid:assignment_id>/reassign/",
        views.assignment_reassign,
        name="assignment_reassign",
    ),
    path(
        "studies/<slug:slug>/annotations/<uuid:annotation_id>/void/",
        views.annotation_void,
        name="annotation_void",
    ),
]
