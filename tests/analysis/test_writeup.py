"""The study's answers in words (analysis.writeup): every number in the summary is the document's,
each verdict follows the study's margins, and the methods cite their references and the versions
that computed them."""

import re
from importlib.metadata import version

from analysis.results import Margins, analyze
from analysis.writeup import methods, summary
from tests.analysis.helpers import make_frames

# Ten exams of hedging: originals all Realistic, rewrites Realistic in 6; Task 2: 9 of 10 without a Major.
TASK1 = [("hedging", f"{i:03d}", "original", (0, 0), None) for i in range(10)] + [
    ("hedging", f"{i:03d}", "alternative", (0, 0) if i < 6 else (1, 1), None) for i in range(10)
]
TASK2 = [("hedging", f"{i:03d}", (0, 0) if i < 7 else ((1, 1) if i < 9 else (2, 2)), None) for i in range(10)]


def _paragraphs(margins: Margins | None = None) -> tuple[dict, dict]:
    document = analyze(make_frames(TASK1, TASK2), margins=margins).document
    return document, dict(summary(document))


def _row(rows: list[dict], **match) -> dict:
    [row] = [row for row in rows if all(row[key] == value for key, value in match.items())]
    return row


def test_the_summary_gives_the_documents_numbers_with_their_intervals():
    document, text = _paragraphs()
    tables = document["tables"]

    realism = text["Realism (Task 1)"]
    original = _row(tables["task1_realistic"], level="overall", report_type="original")
    rewrite = _row(tables["task1_realistic"], level="overall", report_type="alternative")
    assert (
        f"Of 10 original reports, 10 ({100 * original['proportion']:.1f}%; 95% CI {100 * original['ci_low']:.1f}%"
        in realism
    )
    assert (
        f"against 6 of 10 rewrites ({100 * rewrite['proportion']:.1f}%; 95% CI {100 * rewrite['ci_low']:.1f}%"
        in realism
    )
    difference = _row(tables["task1_realistic_difference"], level="overall")
    assert f"differed by {100 * difference['difference']:+.1f} percentage points" in realism
    assert f"95% CI {100 * difference['ci_low']:+.1f} to {100 * difference['ci_high']:+.1f} points" in realism
    assert "No non-inferiority margin is set" in realism
    # A release has no reader identities: the mixed model says why it is not there.
    assert "Mixed model: not computable from a release" in realism

    equivalence = text["Clinical equivalence (Task 2)"]
    no_major = _row(tables["task2_proportions"], level="overall", measure="no_major_discrepancy")
    assert f"Of 10 pairs, 9 ({100 * no_major['proportion']:.1f}%; 95% CI {100 * no_major['ci_low']:.1f}%" in equivalence
    assert "7 (70.0%" in equivalence and "Hedging (9 of 10, 90.0%)" in equivalence

    agreement = text["Agreement between radiologists"]
    agreed = _row(tables["agreement"], task="task1", level="overall", measure="two_reads_agreed")
    assert f"the first two reads agreed in {100 * agreed['value']:.1f}%" in agreement
    # No number in the text that the document does not hold (the p-values are the document's, rounded).
    p_values = re.findall(r"P = (\.\d+)", realism)
    assert p_values and all(f"{row['p_value']:.3f}".lstrip("0") in p_values for row in [difference])


def test_the_verdicts_follow_the_studys_margins():
    _, loose = _paragraphs(Margins(task1_realistic=0.8, task2_major=0.5))
    _, tight = _paragraphs(Margins(task1_realistic=0.01, task2_major=0.01))

    assert "The rewrites were non-inferior to the originals" in loose["Realism (Task 1)"]
    assert "margin of -80 points" in loose["Realism (Task 1)"]
    assert "were shown clinically equivalent" in loose["Clinical equivalence (Task 2)"]
    assert (
        "neither shown non-inferior nor inferior: the interval crosses the non-inferiority margin of -1 points"
        in (tight["Realism (Task 1)"])
    )
    assert "were not shown clinically equivalent" in tight["Clinical equivalence (Task 2)"]


def test_a_study_with_no_task2_yet_says_so_and_a_live_study_gives_its_agreement_coefficients():
    document = analyze(make_frames(TASK1, (), live=True)).document
    text = dict(summary(document))

    assert text["Clinical equivalence (Task 2)"] == "No Task 2 pair has a consensus yet (0 examples rated)."
    assert "percent agreement" in text["Agreement between radiologists"]
    assert "Gwet's AC1" in text["Agreement between radiologists"]


def test_the_methods_cite_each_methods_references_and_the_versions_that_computed_them():
    document, _ = _paragraphs()
    text = methods(document)

    proportions = next(line for line in text.splitlines() if line.startswith("- **Proportions.**"))
    number = re.search(r"\[(\d+)\]$", proportions).group(1)
    assert f"\n{number}. Wilson EB. Probable inference" in text
    for reference in ("Holm S.", "Newcombe RG.", "Krippendorff K.", "Fisher RA."):
        assert reference in text, reference
    for package in ("numpy", "scipy", "statsmodels", "pandas", "krippendorff", "matplotlib"):
        assert f"- {package} {version(package)}" in text
