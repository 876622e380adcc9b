from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "analysis"

    def ready(self) -> None:
        from analysis import queueing
        from annotation.signals import pairs_sampled

        pairs_sampled.connect(queueing.score_sampled_pairs, dispatch_uid="analysis.score_sampled_pairs")
