"""The settlement task's former address: the task is consensus.services.settle_ratings_task.

A queued task is stored under the dotted path of its function, and the worker (django_tasks_db)
imports that path when it runs it. Settlements queued before the task moved are stored as
consensus.tasks.settle_ratings_task: this name keeps them running. Nothing else imports it.
"""

from consensus.services import settle_ratings_task as settle_ratings_task
