"""Reader quality: each reader's figures next to the others', with flags and their reasons."""

import random

import pandas as pd
import pytest

from analysis.frames import READS, RELEASE_FILES, ReleaseFrames
from analysis.reader_quality import MIN_READS, reader_quality, reader_quality_table

T1 = ("Realistic", "Minor Issues", "Major Issues")


def frames_of(reads: list[dict], adjudicated: dict[tuple, str] | None = None) -> ReleaseFrames:
    """Release frames with only the parts reader quality reads: the reads and the adjudicators' ratings."""
    empty = {
        path.split("/")[1].removesuffix(".csv"): pd.DataFrame(columns=cols, dtype=str)
        for path, cols in RELEASE_FILES.items()
    }
    rows = [
        {
            "dataset": "mimic-cxr",
            "study_id": sid,
            "reref_variation": "hedging",
            "report_type": "original",
            "rating": r,
            "rationale": "Why.",
        }
        for (sid, r) in (adjudicated or {}).items()
    ]
    empty["task1_disagreed"] = pd.DataFrame(rows, columns=RELEASE_FILES["task1/task1_disagreed.csv"], dtype=str)
    full = [
        {
            "task": "task1",
            "dataset": "mimic-cxr",
            "reref_variation": "hedging",
            "report_type": "original",
            "rationale": "",
            "duration_ms": "",
            **read,
        }
        for read in reads
    ]
    return ReleaseFrames(**empty, reads=pd.DataFrame(full, columns=READS, dtype=str))


def read(study_id: str, slot: int, reader: str, rating: str, **fields) -> dict:
    return {"study_id": study_id, "slot": str(slot), "reader": reader, "rating": rating, **fields}


def by_reader(frames: ReleaseFrames) -> dict:
    return {r.reader: r for r in reader_quality(frames)}


def test_agreement_compares_each_read_with_the_consensus_of_the_other_reads():
    frames = frames_of(
        [
            # Unanimous: each read agrees with the other one.
            read("1", 1, "a", "Realistic"),
            read("1", 2, "b", "Realistic"),
            # Majority of three: b's read is outvoted; a and c decided it, so theirs are not counted.
            read("2", 1, "a", "Realistic"),
            read("2", 2, "b", "Minor Issues"),
            read("2", 3, "c", "Realistic"),
            # Three-way split: the adjudicator's rating is the reference for every read.
            read("3", 1, "a", "Realistic"),
            read("3", 2, "b", "Minor Issues"),
            read("3", 3, "c", "Major Issues"),
        ],
        adjudicated={"3": "Minor Issues"},
    )

    readers = by_reader(frames)

    assert (readers["a"].agreement, readers["a"].agreement_reads) == (1 / 2, 2)
    assert (readers["b"].agreement, readers["b"].agreement_reads) == (2 / 3, 3)
    assert (readers["c"].agreement, readers["c"].agreement_reads) == (0.0, 1)


def test_a_split_without_an_adjudication_yet_leaves_the_deciding_read_uncounted():
    frames = frames_of(
        [read("1", 1, "a", "Realistic"), read("1", 2, "b", "Minor Issues"), read("1", 3, "c", "Major Issues")]
    )

    readers = by_reader(frames)

    assert readers["a"].agreement is None and readers["a"].agreement_reads == 0
    assert readers["a"].notes["agreement"] == "no read with a consensus of the other reads yet"


def test_it_counts_reads_ratings_time_and_short_rationales():
    frames = frames_of(
        [
            read("1", 1, "a", "Realistic", duration_ms="4000"),
            read("2", 1, "a", "Minor Issues", rationale="Odd.", duration_ms="10000"),
            read("3", 1, "a", "Major Issues", rationale="  A long enough explanation here.  ", duration_ms="30000"),
            read("4", 1, "a", "Realistic", rationale="  twenty characters!  ", duration_ms=""),
        ]
    )

    a = by_reader(frames)["a"]

    assert a.reads == 4 and a.reads_by_task == {"task1": 4}
    assert a.ratings["task1"] == {"Realistic": 2, "Minor Issues": 1, "Major Issues": 1}
    assert a.share("task1", "Realistic") == 0.5
    assert (a.median_seconds, a.timed_reads) == (10.0, 3)
    # "twenty characters!" is 18 once trimmed: two short of three written.
    assert (a.short_rationales, a.rationales) == (2 / 3, 3)


def study_with_a_careless_reader(seed: int = 7) -> ReleaseFrames:
    """60 examples read by careful readers a-d (who mostly agree) and a reader x who rates
    everything Realistic in about 4 seconds with one-word rationales."""
    rng = random.Random(seed)
    reads = []
    careful = ["a", "b", "c", "d"]
    for n in range(60):
        truth = rng.choice(T1)
        first, second = rng.sample(careful, 2)
        for slot, reader in ((1, first), (2, second)):
            rating = truth if rng.random() < 0.85 else rng.choice(T1)
            reads.append(
                read(
                    str(n),
                    slot,
                    reader,
                    rating,
                    rationale="" if rating == "Realistic" else "A clear, specific reason.",
                    duration_ms=str(rng.randint(30_000, 60_000)),
                )
            )
        if n % 2 == 0:
            reads.append(read(str(n), 3, "x", "Realistic", rationale="ok", duration_ms=str(rng.randint(3000, 5000))))
    return frames_of(reads)


def test_a_reader_who_rates_everything_realistic_in_seconds_is_flagged_with_reasons():
    readers = by_reader(study_with_a_careless_reader())

    flags = readers["x"].flags
    assert any(f.startswith("rates 100% of Task 1 reads Realistic") for f in flags), flags
    assert any(f.startswith("median time 4 s per read") for f in flags), flags
    assert any(f.startswith("100% of rationales under 20 characters") for f in flags), flags
    assert any(f.startswith("agrees with the other reads' consensus on") for f in flags), flags
    assert all(readers[r].flags == [] for r in "abcd"), {r: readers[r].flags for r in "abcd"}


def test_a_reader_with_too_few_reads_is_not_flagged():
    frames = frames_of(
        [
            read(str(n), 1, "a", "Minor Issues", rationale="A clear, specific reason.", duration_ms="40000")
            for n in range(20)
        ]
        + [
            read(str(n), 1, "b", "Minor Issues", rationale="A clear, specific reason.", duration_ms="40000")
            for n in range(20, 40)
        ]
        + [
            read(str(n), 1, "c", "Minor Issues", rationale="A clear, specific reason.", duration_ms="40000")
            for n in range(40, 60)
        ]
        + [read(str(n), 1, "x", "Realistic", duration_ms="3000") for n in range(60, 60 + MIN_READS - 1)]
    )

    readers = by_reader(frames)

    assert readers["x"].flags == []
    assert readers["x"].median_seconds == 3.0


def test_the_table_says_why_a_figure_is_not_computable_and_never_holds_nan():
    frames = frames_of([read("1", 1, "a", "Realistic"), read("2", 1, "b", "Realistic")])

    table = reader_quality_table(reader_quality(frames))

    assert table.loc[0, "median_seconds"] == "not computable: no read with a recorded time"
    assert table.loc[0, "short_rationales"] == "not computable: no rationale written"
    assert table.loc[0, "agreement"] == "not computable: no read with a consensus of the other reads yet"
    assert not table.isna().any().any()


def test_it_refuses_a_release_which_has_no_reads():
    frames = frames_of([])
    release = ReleaseFrames(
        **{
            name: getattr(frames, name)
            for name in (
                "task1_full",
                "task1_disagreed",
                "task1_consensus",
                "task2_full",
                "task2_disagreed",
                "task2_consensus",
            )
        }
    )

    with pytest.raises(ValueError, match="live study's reads"):
        reader_quality(release)


def test_reading_times_are_shown_in_the_unit_that_shows_their_differences():
    from analysis.presentation import duration

    assert [duration(s) for s in (0.04, 0.44, 9.96, 37.25, 59.94)] == ["0.0 s", "0.4 s", "10.0 s", "37.2 s", "59.9 s"]
    assert [duration(s) for s in (59.96, 125.4, 3600)] == ["1 min 00 s", "2 min 05 s", "60 min 00 s"]
