from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from annotation import api as annotation_api

router = DefaultRouter()
router.register("studies", annotation_api.StudyViewSet, basename="study")
router.register("datasets", annotation_api.DatasetViewSet, basename="dataset")

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api_docs"),
    path("api/", include(router.urls)),
    path("", include("annotation.urls")),
]
