"""Settling ratings on Django's Tasks framework, run by `manage.py db_worker` (the worker that builds releases)."""

from django.tasks import task

from consensus.services import settle_due_ratings


@task()
def settle_ratings_task() -> dict:
    """Settle the ratings whose undo window has closed (queued for the end of the second of a rating's settle_by).

    It settles every due rating, not only the one that queued it, so a task that was lost or ran
    late is made up for by the next.
    """
    return {"settled": settle_due_ratings()}
