"""Checks of the protocol's bookkeeping that several tests share."""

from collections import Counter

from annotation.models import Assignment, AssignmentStatus, ReaderQueue, Study


def queue_counter_mismatches(study: Study) -> dict:
    """Each (reader, task) whose ReaderQueue counters differ from its assignments: {key: (counted, actual)}.

    Open items count as open; rated and voided ones as rated (a voided read was a rating).
    """
    counted = {(q.reader_id, q.task): (q.open_count, q.rated_count) for q in ReaderQueue.objects.filter(study=study)}
    actual: Counter = Counter()
    for reader_id, task, status in Assignment.objects.filter(study=study).values_list("reader_id", "task", "status"):
        actual[(reader_id, task, status)] += 1
    mismatches = {}
    for key in {(r, t) for r, t, _ in actual} | set(counted):
        opened = actual[(*key, AssignmentStatus.OPEN)]
        rated = actual[(*key, AssignmentStatus.DONE)] + actual[(*key, AssignmentStatus.VOIDED)]
        if counted.get(key, (0, 0)) != (opened, rated):
            mismatches[key] = (counted.get(key), (opened, rated))
    return mismatches
