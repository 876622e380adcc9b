"""Automatic report-generation metrics on (original, alternative) pairs: BLEU-2, ROUGE-L F1 and chrF.

Pure functions of text; nothing here knows of Django or of the release files. Every score equals
its reference package on the same texts (tested in tests/analysis/test_metrics_reference.py):

- **BLEU-2** as ReXrank computes it (ReXrank scores with CXR-Report-Metric's `add_bleu_col`:
  fast-bleu's `BLEU([reference], {"bigram": (1/2, 1/2)})`): tokens are
  `text.lower().replace(".", " .").split(" ")` without empty strings (split on the space character
  only, so a line break does not separate two tokens, exactly as there); unigram and bigram
  modified precision with weights 1/2 each; brevity penalty against the one reference; smoothing
  method 1 (a zero bigram count becomes 0.1 / the number of bigrams); 0 when no unigram matches.
  Equal to `nltk.translate.bleu_score.sentence_bleu([ref], hyp, weights=(0.5, 0.5),
  smoothing_function=SmoothingFunction().method1)` on those tokens. Scale 0-1.
- **ROUGE-L F1**: `rouge_score.rouge_scorer.RougeScorer(["rougeL"]).score(reference, candidate)
  .fmeasure` (its default tokenizer: lower case, runs of characters other than a-z and 0-9 split
  tokens, no stemming). The longest common subsequence is computed bit-parallel (Allison & Dix
  1986; Hyyrö 2004) rather than with rouge-score's quadratic Python table: same number, far faster.
  Scale 0-1. F1 is symmetric, so the reverse direction is the same number.
- **chrF**: sacrebleu's `CHRF()` defaults (character n-grams 1-6, beta = 2, whitespace removed,
  case kept, no word n-grams), `sentence_score(candidate, [reference]).score`: the n-gram counts
  are those of sacrebleu's `extract_all_char_ngrams` (counted a little faster) and the score is
  sacrebleu's own `CHRF._compute_f_score`.
  Scale 0-100.

Each pair is scored once for both directions: the clipped n-gram matches of BLEU and chrF are
symmetric, so the reverse direction (the alternative as the reference) only swaps the counts.

`score_pairs(references, candidates)` scores many pairs; with a `MetricCache` a pair already
scored (same two texts, same metric versions) is read back instead of computed.
"""

import functools
import hashlib
import math
import multiprocessing
import sqlite3
import struct
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import parallel
from analysis.names import BUILTIN_COLUMNS, BUILTIN_METRICS, metrics_version

# Score columns of score_pairs(): forward = the original is the reference, the alternative the candidate.
COLUMNS = BUILTIN_COLUMNS
BUILTIN = BUILTIN_METRICS
PERFECT = {"bleu2": 1.0, "rougeL": 1.0, "chrf": 100.0}
TITLES = {"bleu2": "BLEU-2 (ReXrank)", "rougeL": "ROUGE-L F1", "chrf": "chrF"}
EPSILON = 0.1  # NLTK's SmoothingFunction default, and fast-bleu's method 1
# sacrebleu's chrF defaults; the character n-gram order its metric uses (CHRF's default, 6).
CHRF_ORDER = 6
Progress = Callable[[int, int], None]
CHUNK = 2000  # pairs per unit of work
PARALLEL_FROM = 10_000  # fewer pairs are scored in this process: starting processes costs more


def report_text(findings: str, impression: str) -> str:
    """The text a metric scores: the findings and the impression (context excluded), one space apart."""
    return " ".join(part for part in (findings, impression) if part)


# BLEU-2 -------------------------------------------------------------------------------------------


def bleu_tokens(text: str) -> list[str]:
    """ReXrank's (CXR-Report-Metric's prep_reports) tokenization."""
    return [token for token in text.lower().replace(".", " .").split(" ") if token != ""]


def _bleu_counts(tokens: list[str]) -> tuple[Counter, Counter]:
    return Counter(tokens), Counter(pairwise(tokens))


def _matches(a: Counter, b: Counter) -> int:
    """Clipped matches: the sum over shared n-grams of the smaller count (symmetric)."""
    common = a.keys() & b.keys()
    return sum(map(min, map(a.__getitem__, common), map(b.__getitem__, common)))


def char_ngrams(text: str) -> list[Counter]:
    """sacrebleu's extract_all_char_ngrams(text, 6, include_whitespace=False), the same counters."""
    line = "".join(text.split())
    size = len(line)
    return [Counter(line), *(Counter([line[i : i + n] for i in range(size - n + 1)]) for n in range(2, CHRF_ORDER + 1))]


def _bleu2(hyp_len: int, ref_len: int, unigram_matches: int, bigram_matches: int) -> float:
    """NLTK's sentence_bleu with weights (1/2, 1/2) and smoothing method 1, from the counts."""
    if unigram_matches == 0:
        return 0.0
    penalty = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    p1 = unigram_matches / max(1, hyp_len)
    bigrams = max(1, hyp_len - 1)
    p2 = bigram_matches / bigrams if bigram_matches else (bigram_matches + EPSILON) / bigrams
    return penalty * math.exp(math.fsum((0.5 * math.log(p1), 0.5 * math.log(p2))))


# ROUGE-L ------------------------------------------------------------------------------------------


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's default tokenizer (no stemming)."""
    from rouge_score import tokenize

    return tokenize.tokenize(text, None)


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel over a (Hyyrö 2004)."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for position, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << position)
    full = (1 << len(a)) - 1
    row = full
    for token in b:
        match = masks.get(token)
        if match:
            common = row & match
            row = ((row + common) | (row - common)) & full
    return len(a) - row.bit_count()


def _f1(lcs: int, reference_len: int, candidate_len: int) -> float:
    """rouge-score's _score_lcs fmeasure."""
    if reference_len == 0 or candidate_len == 0:
        return 0.0
    precision = lcs / candidate_len
    recall = lcs / reference_len
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


# chrF ---------------------------------------------------------------------------------------------


def _chrf_pair(reference: list[Counter], candidate: list[Counter]) -> tuple[float, float]:
    """chrF forward (original as reference) and reverse, from each text's character n-gram counts."""
    forward: list[int] = []
    reverse: list[int] = []
    # The number of n-grams of order n of a line of L characters is L - n + 1 (0 if shorter).
    ref_size, hyp_size = reference[0].total(), candidate[0].total()
    for n, (ref_grams, hyp_grams) in enumerate(zip(reference, candidate, strict=True), start=1):
        n_ref, n_hyp = max(0, ref_size - n + 1), max(0, hyp_size - n + 1)
        match = _matches(hyp_grams, ref_grams)
        forward += [n_hyp, n_ref, match]
        reverse += [n_ref, n_hyp, match]
    metric = _chrf()
    return metric._compute_f_score(forward), metric._compute_f_score(reverse)


@functools.cache
def _chrf():
    """sacrebleu's CHRF() with its defaults, made (and sacrebleu imported, a twentieth of a second) only
    when a score is computed: the scores of texts seen before come from the metric cache."""
    from sacrebleu.metrics.chrf import CHRF

    metric = CHRF()
    assert metric.char_order == CHRF_ORDER, "sacrebleu's default chrF order changed"
    return metric


# Many pairs ---------------------------------------------------------------------------------------


class _Features:
    """What each metric needs of a text, kept for the last few texts (an original is in several pairs)."""

    def __init__(self, keep: int = 64) -> None:
        self._cache: dict[str, tuple] = {}
        self._keep = keep

    def __call__(self, text: str) -> tuple:
        features = self._cache.get(text)
        if features is None:
            tokens = bleu_tokens(text)
            unigrams, bigrams = _bleu_counts(tokens)
            chars = char_ngrams(text)
            features = (len(tokens), unigrams, bigrams, rouge_tokens(text), chars)
            if len(self._cache) >= self._keep:
                self._cache.clear()
            self._cache[text] = features
        return features


def score_pair(reference: str, candidate: str, features: _Features | None = None) -> tuple[float, ...]:
    """The scores of COLUMNS for one pair (reference = the original, candidate = the alternative)."""
    features = features or _Features()
    ref_len, ref_uni, ref_bi, ref_rouge, ref_chars = features(reference)
    hyp_len, hyp_uni, hyp_bi, hyp_rouge, hyp_chars = features(candidate)
    unigram_matches = _matches(hyp_uni, ref_uni)
    bigram_matches = _matches(hyp_bi, ref_bi)
    bleu = _bleu2(hyp_len, ref_len, unigram_matches, bigram_matches)
    bleu_reverse = _bleu2(ref_len, hyp_len, unigram_matches, bigram_matches)
    rouge = _f1(lcs_length(ref_rouge, hyp_rouge), len(ref_rouge), len(hyp_rouge))
    chrf, chrf_reverse = _chrf_pair(ref_chars, hyp_chars)
    return bleu, bleu_reverse, rouge, chrf, chrf_reverse


def text_hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class MetricCache:
    """Scores by the hash of the two texts, in a SQLite file: a pair scored once is never scored again.

    Keyed by the metric definitions' version (metrics_version()), so a change of a package or of
    the algorithm never returns a stale score. Safe to share between processes (SQLite locking);
    a lost or deleted file only costs the time to score again.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.version = metrics_version()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute(
            "CREATE TABLE IF NOT EXISTS scores (version TEXT NOT NULL, pair BLOB NOT NULL, "
            + ", ".join(f"{c} REAL NOT NULL" for c in COLUMNS)
            + ", PRIMARY KEY (version, pair)) WITHOUT ROWID"
        )
        return connection

    def get(self, keys: list[bytes]) -> dict[bytes, tuple[float, ...]]:
        if not self.path.exists() or not keys:
            return {}
        with self._connect() as connection:
            connection.execute("CREATE TEMP TABLE wanted (pair BLOB PRIMARY KEY) WITHOUT ROWID")
            connection.executemany("INSERT OR IGNORE INTO temp.wanted VALUES (?)", ((k,) for k in keys))
            found = connection.execute(
                f"SELECT s.pair, {', '.join('s.' + c for c in COLUMNS)} FROM scores s "  # noqa: S608 (fixed names)
                "JOIN temp.wanted w ON w.pair = s.pair WHERE s.version = ?",
                (self.version,),
            ).fetchall()
        return {row[0]: row[1:] for row in found}

    def put(self, rows: dict[bytes, tuple[float, ...]]) -> None:
        if not rows:
            return
        with self._connect() as connection:
            connection.executemany(
                f"INSERT OR REPLACE INTO scores VALUES (?, ?, {', '.join('?' * len(COLUMNS))})",  # noqa: S608
                ((self.version, key, *values) for key, values in rows.items()),
            )


class DatabaseMetricCache:
    """MetricCache's scores kept in the database (analysis.models.CachedMetricScores), so that every
    worker on every host shares them; the same keys, version and answers as the file's."""

    CHUNK = 2000

    def __init__(self) -> None:
        self.version = metrics_version()
        self._packed = struct.Struct(f"<{len(COLUMNS)}d")

    def get(self, keys: list[bytes]) -> dict[bytes, tuple[float, ...]]:
        from analysis.models import CachedMetricScores  # this module also runs without Django (bench/)

        found: dict[bytes, tuple[float, ...]] = {}
        for start in range(0, len(keys), self.CHUNK):
            rows = CachedMetricScores.objects.filter(
                version=self.version, pair__in=keys[start : start + self.CHUNK]
            ).values_list("pair", "scores")
            found.update((bytes(pair), self._packed.unpack(bytes(scores))) for pair, scores in rows)
        return found

    def put(self, rows: dict[bytes, tuple[float, ...]]) -> None:
        from analysis.models import CachedMetricScores

        made = [
            CachedMetricScores(version=self.version, pair=key, scores=self._packed.pack(*values))
            for key, values in rows.items()
        ]
        # A pair another worker scored meanwhile has the same scores: keep the first.
        CachedMetricScores.objects.bulk_create(made, batch_size=self.CHUNK, ignore_conflicts=True)


def _score_chunk(pairs: list[tuple[str, str]]) -> list[tuple[float, ...]]:
    features = _Features()
    return [score_pair(reference, candidate, features) for reference, candidate in pairs]


def default_workers() -> int:
    return parallel.cores()


class TooManyToScore(Exception):
    """More pairs are not in the cache than the caller would score without being asked."""

    def __init__(self, unscored: int, total: int) -> None:
        super().__init__(f"{unscored} of {total} pairs are not scored yet")
        self.unscored, self.total = unscored, total


def score_pairs(
    references: Sequence[str],
    candidates: Sequence[str],
    *,
    cache: MetricCache | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
    limit: int | None = None,
) -> pd.DataFrame:
    """One row per pair, columns COLUMNS (reference[i] = original, candidate[i] = alternative).

    Pairs found in the cache are read back; the others are scored and written to it. Pairs are
    scored in order of their original, so each original is tokenised once; from PARALLEL_FROM
    pairs on, in chunks over `workers` processes (default: the CPUs this process may use).
    `progress(done, total)` follows the scoring. limit: raise TooManyToScore, before scoring anything,
    if more distinct pairs than this are not in the cache.
    """
    if len(references) != len(candidates):
        raise ValueError("references and candidates must have the same length.")
    total = len(references)
    keys = [text_hash(r) + text_hash(c) for r, c in zip(references, candidates, strict=True)]
    known = cache.get(keys) if cache is not None else {}
    first: dict[bytes, int] = {}
    for index, key in enumerate(keys):
        if key not in known:
            first.setdefault(key, index)
    if limit is not None and len(first) > limit:
        raise TooManyToScore(len(first), total)
    todo = sorted(first.values(), key=keys.__getitem__)
    done = total - len(todo)
    if progress is not None:
        progress(done, total)
    chunks = [todo[start : start + CHUNK] for start in range(0, len(todo), CHUNK)]
    computed: dict[bytes, tuple[float, ...]] = {}
    workers = workers or default_workers()
    if workers > 1 and len(todo) >= PARALLEL_FROM:
        # forkserver: a worker process (with its heartbeat thread) is never forked.
        context = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            jobs = {
                pool.submit(_score_chunk, [(references[i], candidates[i]) for i in chunk]): chunk for chunk in chunks
            }
            for job in as_completed(jobs):
                chunk = jobs[job]
                computed.update(zip((keys[i] for i in chunk), job.result(), strict=True))
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
    else:
        for chunk in chunks:
            scores = _score_chunk([(references[i], candidates[i]) for i in chunk])
            computed.update(zip((keys[i] for i in chunk), scores, strict=True))
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    if cache is not None:
        cache.put(computed)
    values = np.array([known.get(key) or computed[key] for key in keys], dtype=float).reshape(total, len(COLUMNS))
    return pd.DataFrame(values, columns=list(COLUMNS))
