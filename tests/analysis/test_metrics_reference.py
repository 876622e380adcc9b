"""The built-in metrics equal their reference packages (nltk, rouge-score, sacrebleu) on the same texts."""

import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
from rouge_score.rouge_scorer import RougeScorer
from sacrebleu.metrics import CHRF

from analysis import metrics
from tests.hypothesis_profiles import examples

ORIGINAL = (
    "The heart is moderately enlarged, unchanged. There is mild pulmonary vascular congestion. "
    "Small bilateral pleural effusions.\nNo pneumothorax."
)
EXAMPLES = [
    (
        ORIGINAL,
        "Heart: moderately enlarged.\nLungs: mild vascular congestion.\nPleura: small effusions. No pneumothorax.",
    ),
    (
        ORIGINAL,
        "Possibly the heart is moderately enlarged, unchanged. There may be mild pulmonary vascular congestion.",
    ),
    (ORIGINAL, ORIGINAL),
    ("No acute process.", "Normal chest."),  # no unigram in common
    ("Lungs clear.", "Lungs"),  # one token: no bigram at all
    ("", "Something."),
    ("Something.", ""),
    ("", ""),
    ("ÉPANCHEMENT pleural — 3 mm.", "épanchement pleural, 3 mm"),
]
WORDS = ["the", "heart", "is", "enlarged", "no", "effusion", ".", ",", "\n", "Likely", "3", "cm", "ET", "tube"]


def reference_scores(original: str, alternative: str) -> tuple[float, ...]:
    smoothing = SmoothingFunction().method1
    ref_tokens, hyp_tokens = metrics.bleu_tokens(original), metrics.bleu_tokens(alternative)

    def bleu(reference: list[str], hypothesis: list[str]) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nltk warns about zero counts
            return sentence_bleu([reference], hypothesis, weights=(0.5, 0.5), smoothing_function=smoothing)

    chrf = CHRF()
    return (
        bleu(ref_tokens, hyp_tokens) if hyp_tokens else 0.0,  # nltk divides by zero on an empty hypothesis
        bleu(hyp_tokens, ref_tokens) if ref_tokens else 0.0,
        RougeScorer(["rougeL"]).score(original, alternative)["rougeL"].fmeasure,
        chrf.sentence_score(alternative, [original]).score,
        chrf.sentence_score(original, [alternative]).score,
    )


@pytest.mark.parametrize(("original", "alternative"), EXAMPLES)
def test_each_metric_equals_its_reference_package(original, alternative):
    got = metrics.score_pair(original, alternative)

    for name, ours, reference in zip(metrics.COLUMNS, got, reference_scores(original, alternative), strict=True):
        assert math.isclose(ours, reference, rel_tol=0, abs_tol=1e-12), name


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join),
    st.lists(st.sampled_from(WORDS), max_size=40).map(" ".join),
)
def test_random_texts_score_as_the_reference_packages_do(original, alternative):
    got = metrics.score_pair(original, alternative)

    for name, ours, reference in zip(metrics.COLUMNS, got, reference_scores(original, alternative), strict=True):
        assert math.isclose(ours, reference, rel_tol=0, abs_tol=1e-12), name


def test_bleu_tokens_are_rexranks():
    # Lower case, '.' split off, split on the space character only (a line break joins two tokens).
    assert metrics.bleu_tokens("No  effusion.\nHeart Normal.") == ["no", "effusion", ".\nheart", "normal", "."]


def test_the_report_text_is_findings_then_impression():
    assert metrics.report_text("Findings here.", "Impression here.") == "Findings here. Impression here."
    assert metrics.report_text("", "Impression only.") == "Impression only."


def test_score_pairs_gives_the_same_scores_as_one_pair_at_a_time_in_the_input_order():
    originals = [o for o, _ in EXAMPLES]
    alternatives = [a for _, a in EXAMPLES]

    frame = metrics.score_pairs(originals, alternatives, workers=1)

    assert list(frame.columns) == list(metrics.COLUMNS)
    for row, (original, alternative) in zip(frame.itertuples(index=False), EXAMPLES, strict=True):
        assert tuple(row) == metrics.score_pair(original, alternative)


def test_a_rerun_reads_every_score_from_the_cache(tmp_path, monkeypatch):
    cache = metrics.MetricCache(tmp_path / "cache.sqlite3")
    originals, alternatives = [o for o, _ in EXAMPLES], [a for _, a in EXAMPLES]
    first = metrics.score_pairs(originals, alternatives, cache=cache, workers=1)

    def refuse(*args, **kwargs):
        raise AssertionError("scored again instead of read from the cache")

    monkeypatch.setattr(metrics, "score_pair", refuse)
    again = metrics.score_pairs(originals, alternatives, cache=cache, workers=1)

    assert again.equals(first)


def test_a_limit_refuses_more_unscored_pairs_before_scoring_any(tmp_path, monkeypatch):
    cache = metrics.MetricCache(tmp_path / "cache.sqlite3")
    originals, alternatives = [o for o, _ in EXAMPLES], [a for _, a in EXAMPLES]
    metrics.score_pairs(originals[:1], alternatives[:1], cache=cache, workers=1)
    scored = []
    monkeypatch.setattr(metrics, "score_pair", lambda *args: scored.append(args))

    with pytest.raises(metrics.TooManyToScore) as refused:
        metrics.score_pairs(originals, alternatives, cache=cache, workers=1, limit=len(EXAMPLES) - 2)

    assert (refused.value.unscored, refused.value.total) == (len(EXAMPLES) - 1, len(EXAMPLES))
    assert scored == []
    monkeypatch.undo()
    within = metrics.score_pairs(originals, alternatives, cache=cache, workers=1, limit=len(EXAMPLES) - 1)
    assert len(within) == len(EXAMPLES)


def test_scores_cached_under_another_version_are_not_reused(tmp_path, monkeypatch):
    path = tmp_path / "cache.sqlite3"
    stale = metrics.MetricCache(path)
    stale.version = "0;old"
    key = metrics.text_hash("a b") + metrics.text_hash("a c")
    stale.put({key: (9.0, 9.0, 9.0, 9.0, 9.0)})

    frame = metrics.score_pairs(["a b"], ["a c"], cache=metrics.MetricCache(path), workers=1)

    assert tuple(frame.iloc[0]) == metrics.score_pair("a b", "a c")


def test_many_pairs_are_scored_in_worker_processes_with_the_same_results(monkeypatch):
    monkeypatch.setattr(metrics, "PARALLEL_FROM", 4)
    monkeypatch.setattr(metrics, "CHUNK", 3)
    originals = [o for o, _ in EXAMPLES] * 2
    alternatives = [a + f" {i}" for i, (_, a) in enumerate(EXAMPLES * 2)]
    seen = []

    parallel = metrics.score_pairs(originals, alternatives, workers=2, progress=lambda d, t: seen.append((d, t)))

    assert parallel.equals(metrics.score_pairs(originals, alternatives, workers=1))
    assert seen[-1] == (len(originals), len(originals))


def test_no_nltk_data_is_needed(monkeypatch, tmp_path):
    # The tokenizers are ReXrank's and rouge-score's: no punkt download.
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    assert metrics.score_pair(ORIGINAL, EXAMPLES[0][1])[0] > 0
