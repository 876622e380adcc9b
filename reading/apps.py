from django.apps import AppConfig


class ReadingConfig(AppConfig):
    """What readers and adjudicators use: their pages and API, the guide and practice as they see them."""

    name = "reading"
    verbose_name = "Reading"
