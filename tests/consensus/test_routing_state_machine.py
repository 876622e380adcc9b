"""Random studies, submissions, voids, withdrawals, reassignments, adjudications and new people; the
protocol's invariants after every step, the audit trail included. Seeded (derandomize) and bounded.

With an undo window (UndoWindowRoutingMachine), ratings also wait in their window, are taken back
and settle at random moments, and routing must only ever act on settled ones.
"""

import contextlib
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from annotation.models import (
    RATINGS_WITHOUT_RATIONALE,
    TASK_RATINGS,
    Annotation,
    Assignment,
    AssignmentStatus,
    AuditAction,
    AuditEvent,
    Example,
    ExampleState,
    MemberRole,
    ReaderQueue,
    Role,
    Study,
    StudyMember,
    Task,
)
from consensus import reserve
from consensus.assignment import (
    QueueRefused,
    add_study_member,
    assign_readers,
    reassign_assignment,
    withdraw_assignment,
)
from consensus.models import Adjudication, AdjudicationStatus, ConsensusLabel, LabelSource
from consensus.services import (
    AlreadySubmitted,
    settle_due_ratings,
    show_assignment,
    submit_adjudication,
    submit_annotation,
    undo_last_rating,
    void_annotation,
)
from tests.factories import make_reading_study, make_user
from tests.hypothesis_profiles import examples
from tests.invariants import exams_given_twice, queue_counter_mismatches, texts_shown_twice


class RoutingMachine(RuleBasedStateMachine):
    keep_versions_apart = False
    # Readers at the start beyond what the first assignment needs: with none, a third read finds
    # nobody eligible until a reader is added.
    readers = st.integers(min_value=0, max_value=2)
    undo_window_seconds = 0

    def __init__(self) -> None:
        super().__init__()
        # Each run works in a savepoint that is rolled back in teardown().
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        self.study = None
        # Examples an initial read was withdrawn from by hand: they wait for one until a coordinator acts.
        self.withdrawn_from: set[int] = set()

    @initialize(data=st.data())
    def a_study(self, data: st.DataObject) -> None:
        # Who gets which read is drawn from the study's seed and the examples' public ids, and it
        # decides what later steps find (who is still eligible, what a submit settles). Both are
        # drawn here, so that a failing run replays exactly. So are the primary keys the draws use:
        # PostgreSQL's sequences are not rolled back with the run (SQLite reuses the ids).
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                for table in REPLAYED_TABLES:
                    cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), 1000000, false)", [table])
        self.study, _, _ = make_reading_study(
            pairs=data.draw(st.integers(min_value=1, max_value=3), label="pairs"),
            # Consecutive pairs share an exam (and its original text), as sampling lets them.
            pairs_per_exam=data.draw(st.integers(min_value=1, max_value=2), label="pairs per exam"),
            readers_beyond_initial=data.draw(self.readers, label="readers"),
            adjudicators=data.draw(st.integers(min_value=0, max_value=1), label="adjudicators"),
            adjudicator_subspecialty=data.draw(st.sampled_from(["cardiothoracic", "general"]), label="subspecialty"),
            keep_versions_apart=self.keep_versions_apart,
            assign=False,
            # With a reserve, part of the initial reads wait in their readers' reserves (consensus.reserve).
            reserve_percent=data.draw(st.sampled_from([0, 70]), label="reserve"),
        )
        seed = data.draw(st.integers(min_value=0, max_value=2**31 - 1), label="seed")
        Study.objects.filter(pk=self.study.pk).update(seed=seed, undo_window_seconds=self.undo_window_seconds)
        for example in Example.objects.filter(study=self.study).select_related("pair__variation"):
            pair = example.pair
            name = f"{seed}:{pair.source_study_id}:{pair.variation.key}:{example.task}:{example.report_type}"
            Example.objects.filter(pk=example.pk).update(public_id=uuid.uuid5(uuid.NAMESPACE_URL, name))
        self.study.refresh_from_db()
        self.coordinator = make_user(Role.COORDINATOR)
        assign_readers(self.study, actor=self.coordinator)

    def teardown(self) -> None:
        transaction.set_rollback(True)
        self._atomic.__exit__(None, None, None)

    # --- rules ------------------------------------------------------------------------

    def _open(self, *, given: bool = False) -> QuerySet[Assignment]:
        """Open assignments; given: only those their readers can be given (not in a reserve). A
        precondition asks whether there is one (exists), a rule draws from the list."""
        found = Assignment.objects.filter(example__study=self.study, status=AssignmentStatus.OPEN)
        return found.filter(held=False) if given else found

    def _open_assignments(self, *, given: bool = False) -> list[Assignment]:
        return list(
            self._open(given=given)
            .select_related("reader", "example")
            # Not by pk: assignments are stored in queue order, which follows random public ids,
            # and a replayed run must meet the same list.
            .order_by("example_id", "slot")
        )

    @precondition(lambda self: self._open(given=True).exists())
    @rule(data=st.data())
    def submit(self, data: st.DataObject) -> None:
        assignment = data.draw(st.sampled_from(self._open_assignments(given=True)))
        rating = data.draw(st.sampled_from(TASK_RATINGS[assignment.example.task]))
        token = uuid.uuid4()
        kwargs = dict(
            reader=assignment.reader,
            assignment_id=assignment.public_id,
            rating=rating,
            rationale="" if rating in RATINGS_WITHOUT_RATIONALE else "Because.",
            form_token=token,
        )
        first = submit_annotation(**kwargs)
        assert first.created
        if data.draw(st.booleans()):
            # A retry with the same token answers with the stored annotation.
            again = submit_annotation(**kwargs)
            assert not again.created and again.annotation.pk == first.annotation.pk
        if data.draw(st.booleans()):
            # Another tab: already rated.
            with pytest.raises(AlreadySubmitted):
                submit_annotation(**{**kwargs, "form_token": uuid.uuid4()})

    def _valid(self) -> QuerySet[Annotation]:
        return Annotation.objects.filter(example__study=self.study, voided_at__isnull=True, settled_at__isnull=False)

    def _valid_annotations(self) -> list[Annotation]:
        return list(self._valid().order_by("pk"))

    def _unsettled(self) -> QuerySet[Annotation]:
        return Annotation.objects.filter(example__study=self.study, settled_at__isnull=True)

    def _unsettled_annotations(self) -> list[Annotation]:
        return list(self._unsettled().select_related("reader").order_by("pk"))

    @precondition(lambda self: self._unsettled().exists())
    @rule(data=st.data())
    def undo(self, data: st.DataObject) -> None:
        annotation = data.draw(st.sampled_from(self._unsettled_annotations()))
        result = undo_last_rating(annotation.reader)
        assert result.assignment.pk == annotation.assignment_id
        assert not Annotation.objects.filter(pk=annotation.pk).exists()

    @precondition(lambda self: self._unsettled().exists())
    @rule()
    def windows_close(self) -> None:
        settle_due_ratings(now=timezone.now() + timedelta(seconds=self.undo_window_seconds + 1))

    @precondition(lambda self: self._valid().exists())
    @rule(data=st.data())
    def void(self, data: st.DataObject) -> None:
        annotation = data.draw(st.sampled_from(self._valid_annotations()))
        void_annotation(annotation.public_id, actor=self.coordinator, reason="Test void.")

    def _open_adjudication_rows(self) -> QuerySet[Adjudication]:
        return Adjudication.objects.filter(example__study=self.study, status=AdjudicationStatus.OPEN)

    def _open_adjudications(self) -> list[Adjudication]:
        return list(self._open_adjudication_rows().select_related("adjudicator").order_by("pk"))

    @precondition(lambda self: self._open_adjudication_rows().exists())
    @rule(data=st.data())
    def adjudicate(self, data: st.DataObject) -> None:
        adjudication = data.draw(st.sampled_from(self._open_adjudications()))
        rating = data.draw(st.sampled_from(TASK_RATINGS[adjudication.task]))
        submit_adjudication(
            adjudicator=adjudication.adjudicator,
            adjudication_id=adjudication.public_id,
            rating=rating,
            rationale="Decided.",
            form_token=uuid.uuid4(),
        )

    @precondition(lambda self: self._open(given=True).exists())
    @rule(data=st.data())
    def show(self, data: st.DataObject) -> None:
        assignment = data.draw(st.sampled_from(self._open_assignments(given=True)))
        show_assignment(Assignment.objects.select_related("example__study").get(pk=assignment.pk))

    @precondition(lambda self: self._open().exists())
    @rule(data=st.data())
    def withdraw(self, data: st.DataObject) -> None:
        assignment = data.draw(st.sampled_from(self._open_assignments()))
        withdraw_assignment(assignment.public_id, actor=self.coordinator)
        self.withdrawn_from.add(assignment.example_id)

    @precondition(lambda self: self._open().exists())
    @rule(data=st.data())
    def reassign(self, data: st.DataObject) -> None:
        assignment = data.draw(st.sampled_from(self._open_assignments()))
        members = list(
            StudyMember.objects.filter(study=self.study, role=MemberRole.READER).select_related("user").order_by("pk")
        )
        reader = data.draw(st.sampled_from(members)).user
        with contextlib.suppress(QueueRefused):  # a refusal changes nothing; the invariants check that too
            reassign_assignment(assignment.public_id, reader, actor=self.coordinator)

    @precondition(lambda self: Assignment.objects.filter(study=self.study, held=True).exists())
    @rule(data=st.data())
    def a_reader_asks_for_their_next_item(self, data: st.DataObject) -> None:
        members = list(
            StudyMember.objects.filter(study=self.study, role=MemberRole.READER).select_related("user").order_by("pk")
        )
        reader = data.draw(st.sampled_from(members)).user
        task = data.draw(st.sampled_from(Task.values))
        given = reserve.next_assignment(reader, task=task, study_id=self.study.pk)
        if given is not None:
            assert (given.reader_id, given.task, given.status, given.held) == (reader.pk, task, "open", False)

    @precondition(lambda self: Assignment.objects.filter(study=self.study, held=True).exists())
    @rule()
    def every_reader_stops_for_a_while(self) -> None:
        quiet = timezone.now() - timedelta(seconds=reserve.quiet_seconds() + 1)
        ReaderQueue.objects.filter(study=self.study, last_rated_at__isnull=False).update(last_rated_at=quiet)

    @rule()
    def add_reader(self) -> None:
        reader = make_user(Role.READER)
        add_study_member(self.study, reader, MemberRole.READER, actor=self.coordinator)

    @rule()
    def add_adjudicator(self) -> None:
        adjudicator = make_user(Role.ADJUDICATOR, subspecialty="cardiothoracic")
        add_study_member(self.study, adjudicator, MemberRole.ADJUDICATOR, actor=self.coordinator)

    # --- invariants -------------------------------------------------------------------

    @invariant()
    def the_queue_counters_match_the_assignments(self) -> None:
        if self.study is None:
            return
        assert queue_counter_mismatches(self.study) == {}

    @invariant()
    def a_read_in_a_reserve_was_never_shown_nor_rated(self) -> None:
        if self.study is None:
            return
        held = Assignment.objects.filter(study=self.study, held=True)
        assert not held.exclude(status=AssignmentStatus.OPEN).exists()
        assert not held.filter(first_shown_at__isnull=False).exists()
        assert not held.filter(slot=3).exists()

    @invariant()
    def no_reader_is_given_one_report_text_twice(self) -> None:
        if self.study is None:
            return
        assert texts_shown_twice(self.study) == {}

    @invariant()
    def no_reader_holds_two_items_of_an_exam_when_kept_apart(self) -> None:
        if self.study is None or not self.keep_versions_apart:
            return
        assert exams_given_twice(self.study) == {}

    @invariant()
    def every_example_follows_the_protocol(self) -> None:
        if self.study is None:
            return
        labels = {c.example_id: c for c in ConsensusLabel.objects.filter(example__study=self.study)}  # one at most
        for example in Example.objects.filter(study=self.study).prefetch_related(
            "assignments", "annotations", "adjudications"
        ):
            assignments = list(example.assignments.all())
            active = [a for a in assignments if a.status in (AssignmentStatus.OPEN, AssignmentStatus.DONE)]
            valid = [a for a in example.annotations.all() if a.voided_at is None and a.settled_at is not None]
            unsettled = [a for a in example.annotations.all() if a.settled_at is None]
            adjudications = [a for a in example.adjudications.all() if a.status != AdjudicationStatus.VOIDED]
            consensus = labels.get(example.pk)

            # A reader never has the same example twice; slots hold at most one active read.
            assert len({a.reader_id for a in assignments}) == len(assignments)
            assert len({a.slot for a in active}) == len(active) <= 3
            assert len(valid) <= 3
            assert len(adjudications) <= 1
            for annotation in valid:
                assert annotation.rating in TASK_RATINGS[example.task]
            readers = {a.reader_id for a in assignments}
            for adjudication in adjudications:
                assert adjudication.adjudicator_id not in readers
            # An adjudicator only on a three-way split of three valid ratings.
            if adjudications:
                assert len(valid) == 3 and len({a.rating for a in valid}) == 3, [a.rating for a in valid]

            ratings = [a.rating for a in valid]
            open_reads = [a for a in active if a.status == AssignmentStatus.OPEN]
            # Routing sees settled ratings only: a rating in its window is a read under way.
            under_way = open_reads + [a for a in active if a.pk in {u.assignment_id for u in unsettled}]
            assert all(a.voided_at is None for a in unsettled)
            votes = Counter(ratings).most_common(1)
            if len(ratings) == 2 and ratings[0] == ratings[1]:
                assert example.state == ExampleState.CONSENSUS
                assert (consensus.rating, consensus.label_source) == (ratings[0], LabelSource.UNANIMOUS)
                assert not open_reads and not any(a.status == AdjudicationStatus.OPEN for a in adjudications)
            elif len(ratings) == 2:
                assert example.state == ExampleState.THIRD_READ
                assert consensus is None
                # Exactly one more reader, or listed as unrouted for the coordinator.
                assert len(under_way) == 1 or (not under_way and example.unrouted)
            elif len(ratings) == 3 and votes[0][1] >= 2:
                assert example.state == ExampleState.CONSENSUS
                assert (consensus.rating, consensus.label_source) == (votes[0][0], LabelSource.MAJORITY)
            elif len(ratings) == 3:
                done = [a for a in adjudications if a.status == AdjudicationStatus.DONE]
                if done:
                    assert example.state == ExampleState.CONSENSUS
                    assert (consensus.rating, consensus.label_source) == (done[0].rating, LabelSource.ADJUDICATED)
                else:
                    assert example.state == ExampleState.ADJUDICATION
                    assert consensus is None
                    assert len(adjudications) == 1 or example.unrouted
            else:
                assert example.state == ExampleState.WAITING
                assert consensus is None
                # Two first reads (rated or open), unless nobody eligible was left or a coordinator
                # withdrew one by hand.
                assert len(active) == 2 or example.unrouted or example.pk in self.withdrawn_from, (
                    len(active),
                    example.unrouted,
                )
            if consensus is not None:
                assert consensus.n_annotations == len(ratings)

    @invariant()
    def every_change_is_in_the_audit_trail(self) -> None:
        if self.study is None:
            return
        events: dict[str, list[tuple[dict, dict]]] = {action: [] for action in AuditAction.values}
        for action, before, after in AuditEvent.objects.filter(study=self.study).values_list(
            "action", "before", "after"
        ):
            events[action].append((before, after))

        # Every assignment was announced once, when it was made (automatically, by hand or as a
        # third read); the only ones gone are those withdrawn before they were shown.
        announced = Counter(
            after["assignment"]
            for action in (AuditAction.ASSIGNED, AuditAction.THIRD_READ_ROUTED)
            for _, after in events[action]
        )
        assert all(n == 1 for n in announced.values()), announced
        withdrawn = {
            before["assignment"]: after["shown"]
            for before, after in events[AuditAction.WITHDRAWN]
            if "assignment" in before
        }
        rows = {
            str(pid): status
            for pid, status in Assignment.objects.filter(study=self.study).values_list("public_id", "status")
        }
        assert set(announced) == set(rows) | {pid for pid, shown in withdrawn.items() if not shown}
        assert not set(rows) & {pid for pid, shown in withdrawn.items() if not shown}
        assert {pid for pid, status in rows.items() if status == AssignmentStatus.WITHDRAWN} == {
            pid for pid, shown in withdrawn.items() if shown
        }

        # Every rating was recorded as submitted, and every void; a rating taken back is gone from the
        # ratings and kept in the trail, as submitted and then taken back.
        annotations = list(
            Annotation.objects.filter(example__study=self.study).values_list(
                "public_id", "assignment__public_id", "rating", "voided_at"
            )
        )
        submitted = Counter((after["assignment"], after["rating"]) for _, after in events[AuditAction.SUBMITTED])
        taken_back = Counter((before["assignment"], before["rating"]) for before, _ in events[AuditAction.UNDONE])
        assert taken_back <= submitted
        assert sorted((submitted - taken_back).elements()) == sorted(
            (str(assignment), rating) for _, assignment, rating, _ in annotations
        )
        voided = sorted(before["annotation"] for before, _ in events[AuditAction.VOIDED])
        assert voided == sorted(str(pid) for pid, _, _, voided_at in annotations if voided_at is not None)

        # Every consensus reached and withdrawn; every adjudication routed and decided.
        labels = ConsensusLabel.objects.filter(example__study=self.study).count()
        assert len(events[AuditAction.CONSENSUS]) - len(events[AuditAction.CONSENSUS_WITHDRAWN]) == labels
        adjudications = list(Adjudication.objects.filter(example__study=self.study).values_list("public_id", "status"))
        routed = sorted(after["adjudication"] for _, after in events[AuditAction.ADJUDICATION_ROUTED])
        assert routed == sorted(str(pid) for pid, _ in adjudications)
        decided = sorted(after["adjudication"] for _, after in events[AuditAction.ADJUDICATED])
        assert set(decided) <= {str(pid) for pid, _ in adjudications}
        assert len(decided) == sum(1 for _, status in adjudications if status == AdjudicationStatus.DONE) + sum(
            1 for before, _ in events[AuditAction.WITHDRAWN] if before.get("rating") and "adjudication" in before
        )

    @invariant()
    def a_reader_has_at_most_one_rating_in_its_window(self) -> None:
        if self.study is None:
            return
        readers = Counter(self._unsettled().values_list("reader_id", flat=True))
        assert all(n == 1 for n in readers.values()), readers


# Tables whose primary keys the draws of routing and assignment depend on.
REPLAYED_TABLES = (
    "auth_user",
    "annotation_study",
    "annotation_candidatepair",
    "annotation_example",
    "annotation_assignment",
    "annotation_annotation",
    "annotation_studymember",
    "consensus_adjudication",
)


class UndoWindowRoutingMachine(RoutingMachine):
    """The same with a two-minute undo window: ratings wait, are taken back and settle at random."""

    undo_window_seconds = 120


class KeptApartRoutingMachine(RoutingMachine):
    """The same, in a study that keeps the items of an exam apart."""

    keep_versions_apart = True


MACHINE_SETTINGS = settings(
    max_examples=examples(25),
    stateful_step_count=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
RoutingMachine.TestCase.settings = MACHINE_SETTINGS
KeptApartRoutingMachine.TestCase.settings = MACHINE_SETTINGS
UndoWindowRoutingMachine.TestCase.settings = MACHINE_SETTINGS


@pytest.mark.slow
@pytest.mark.django_db
def test_routing_keeps_the_protocol_under_random_operations() -> None:
    RoutingMachine.TestCase("runTest").runTest()


@pytest.mark.slow
@pytest.mark.django_db
def test_routing_keeps_versions_apart_under_random_operations() -> None:
    KeptApartRoutingMachine.TestCase("runTest").runTest()


@pytest.mark.slow
@pytest.mark.django_db
def test_routing_acts_on_settled_ratings_only_under_random_undos_and_settlements() -> None:
    UndoWindowRoutingMachine.TestCase("runTest").runTest()
