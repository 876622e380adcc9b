"""Metric scoring benchmark: BLEU-2, ROUGE-L and chrF (both directions) on generated pairs.

    .venv/bin/python bench/metrics.py [--pairs 100000] [--workers N] [--baseline 1000]

Generates N (original, alternative) pairs shaped like a ReRef study: one original report for every
12 pairs (a report is rewritten along each of the 12 variations), built from the sentences of the
demo study's reports with numbers that make every text distinct (about 350 to 700 characters).
Then, in this process:
- cold: `analysis.metrics.score_pairs` with an empty cache file (every pair scored, then cached);
- warm: the same call again (every score read back from the cache);
- baseline: the reference packages called pair by pair (nltk sentence_bleu both ways, rouge-score's
  RougeScorer, sacrebleu's CHRF.sentence_score both ways) on the first --baseline pairs, extrapolated.
Prints wall times, pairs per second, the ratio against the baseline and the load average before
and after (the machine is shared). Target: cold under 120 s for 100,000 pairs.
"""

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import metrics

ROOT = Path(__file__).resolve().parent.parent
HEDGES = ("Possibly ", "Likely ", "Cannot exclude that ", "It is probable that ")


def _sentences() -> list[str]:
    found = []
    with open(ROOT / "reading" / "demo" / "pairs.jsonl", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            for field in ("original_findings", "original_impression", "alternative_findings"):
                found += [s.strip() + "." for s in row[field].replace("\n", " ").split(".") if len(s.strip()) > 8]
    return sorted(set(found))


def generate_pairs(count: int, seed: int = 7) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    pool = _sentences()
    references, candidates = [], []
    while len(references) < count:
        sentences = rng.sample(pool, rng.randint(5, 9))
        sentences.insert(
            rng.randrange(len(sentences)), f"Nodule measures {rng.randint(2, 40)} mm in series {rng.randint(1, 9999)}."
        )
        original = " ".join(sentences)
        for _ in range(min(12, count - len(references))):
            rewritten = list(sentences)
            rng.shuffle(rewritten)
            if rng.random() < 0.5:
                rewritten.pop(rng.randrange(len(rewritten)))
            index = rng.randrange(len(rewritten))
            rewritten[index] = rng.choice(HEDGES) + rewritten[index][0].lower() + rewritten[index][1:]
            separator = rng.choice((" ", "\n"))
            references.append(original)
            candidates.append(separator.join(rewritten))
    return references, candidates


def _cpu_seconds() -> float:
    """User + system CPU of this process."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def baseline_seconds(references: list[str], candidates: list[str]) -> float:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from rouge_score.rouge_scorer import RougeScorer
    from sacrebleu.metrics import CHRF

    smoothing, rouge, chrf = SmoothingFunction().method1, RougeScorer(["rougeL"]), CHRF()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for reference, candidate in zip(references, candidates, strict=True):
            ref_tokens, hyp_tokens = metrics.bleu_tokens(reference), metrics.bleu_tokens(candidate)
            sentence_bleu([ref_tokens], hyp_tokens, weights=(0.5, 0.5), smoothing_function=smoothing)
            sentence_bleu([hyp_tokens], ref_tokens, weights=(0.5, 0.5), smoothing_function=smoothing)
            rouge.score(reference, candidate)
            chrf.sentence_score(candidate, [reference])
            chrf.sentence_score(reference, [candidate])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=None, help="Processes (default: the CPUs available).")
    parser.add_argument("--baseline", type=int, default=1000, help="Pairs scored by the reference packages.")
    args = parser.parse_args()

    load_before = os.getloadavg()
    references, candidates = generate_pairs(args.pairs)
    characters = sum(map(len, references)) + sum(map(len, candidates))
    print(f"{args.pairs:,} pairs, {len(set(references)):,} distinct originals, "
          f"{characters / (2 * args.pairs):.0f} characters per report on average")  # fmt: skip
    workers = args.workers or metrics.default_workers()
    with tempfile.TemporaryDirectory() as folder:
        cache = metrics.MetricCache(Path(folder) / "metric-cache.sqlite3")
        start = time.perf_counter()
        cold = metrics.score_pairs(references, candidates, cache=cache, workers=workers)
        cold_seconds = time.perf_counter() - start
        load_cold = os.getloadavg()
        start = time.perf_counter()
        warm = metrics.score_pairs(references, candidates, cache=cache, workers=workers)
        warm_seconds = time.perf_counter() - start
        assert warm.equals(cold), "the cache returned other scores"
        size_mb = cache.path.stat().st_size / 1e6
    n = min(args.baseline, args.pairs)
    # The scoring processes are the forkserver's children, not ours: CPU time is measured on a
    # sample scored in this process (no cache), extrapolated; the load does not inflate it.
    cpu_start = _cpu_seconds()
    metrics.score_pairs(references[:n], candidates[:n], workers=1)
    cold_cpu = (_cpu_seconds() - cpu_start) * args.pairs / n
    cpu_start = _cpu_seconds()
    base = baseline_seconds(references[:n], candidates[:n]) * args.pairs / n
    base_cpu = (_cpu_seconds() - cpu_start) * args.pairs / n
    load_after = os.getloadavg()

    print(f"workers: {workers} (CPUs available: {metrics.default_workers()}, os.cpu_count: {os.cpu_count()})")
    print(
        f"cold (no cache): {cold_seconds:8.1f} s  {args.pairs / cold_seconds:10,.0f} pairs/s"
        f"  (CPU, {n:,} pairs in one process, extrapolated: {cold_cpu:.1f} s)"
    )
    print(
        f"warm (all cached):     {warm_seconds:8.1f} s  {args.pairs / warm_seconds:10,.0f} pairs/s"
        f"  (cache {size_mb:.0f} MB)"
    )
    print(f"baseline (packages, {n:,} pairs extrapolated): {base:8.1f} s  CPU {base_cpu:.1f} s")
    print(
        f"ratio cold / baseline: wall {cold_seconds / base:.3f}, CPU {cold_cpu / base_cpu:.3f}   "
        f"warm / cold: {warm_seconds / cold_seconds:.3f}"
    )
    print("means:", ", ".join(f"{name} {cold[name].mean():.3f}" for name in metrics.COLUMNS))
    print("load average (1, 5, 15 min): before " + " ".join(f"{v:.2f}" for v in load_before)
          + ", after cold " + " ".join(f"{v:.2f}" for v in load_cold)
          + ", at the end " + " ".join(f"{v:.2f}" for v in load_after))  # fmt: skip
    print("target: cold under 120 s at 100,000 pairs:", "met" if cold_seconds < 120 else "NOT met")


if __name__ == "__main__":
    main()
