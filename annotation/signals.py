"""What the study set-up tells other apps, without depending on them."""

from django.dispatch import Signal

# Sent once a study's new sample is committed (annotation.services.sample_pairs), with study=.
# The analysis scores the sampled pairs' metrics then, in the worker (analysis.queueing).
pairs_sampled = Signal()
