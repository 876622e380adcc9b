"""The study's answers in words: the summary a results section opens with, and the methods paragraph.

`summary(document)` gives a paragraph per question (realism, clinical equivalence, agreement) from
the numbers of the results document, each with its interval and test; `methods(document)` gives
each method with its reference and the versions of the packages that computed it. The Results page
shows the summary first; `analyze_release` and the download write both as summary.md and
methods.md. Nothing is computed here: every number is the document's, only put into sentences, and
a number the document does not define is said to be not computable, with the reason.

Pure Python on the document (no pandas): a web request imports it.
"""

import platform
from importlib.metadata import PackageNotFoundError, version

from analysis.names import group_label, variation_labels

TASK_NAMES = {"task1": "Task 1 (realism)", "task2": "Task 2 (clinical equivalence)"}
# The packages whose code computes a number in the results (krippendorff: the reference the alphas are held
# equal to), in the order methods.md lists them.
PACKAGES = (
    "numpy", "scipy", "statsmodels", "pandas", "krippendorff", "matplotlib", "nltk", "rouge-score", "sacrebleu",
)  # fmt: skip
REFERENCES = {
    "wilson": (
        "Wilson EB. Probable inference, the law of succession, and statistical inference. J Am Stat Assoc "
        "1927;22:209-212."
    ),
    "newcombe": (
        "Newcombe RG. Improved confidence intervals for the difference between binomial proportions based on paired "
        "data. Stat Med 1998;17:2635-2650."
    ),
    "mcnemar": (
        "McNemar Q. Note on the sampling error of the difference between correlated proportions or "
        "percentages. Psychometrika 1947;12:153-157."
    ),
    "fisher_pitman": "Good P. Permutation, Parametric, and Bootstrap Tests of Hypotheses. 3rd ed. Springer; 2005.",
    "holm": "Holm S. A simple sequentially rejective multiple test procedure. Scand J Stat 1979;6:65-70.",
    "fisher": (
        "Fisher RA. On the interpretation of chi-squared from contingency tables, and the calculation of P. "
        "J R Stat Soc 1922;85:87-94."
    ),
    "krippendorff": "Krippendorff K. Computing Krippendorff's alpha-reliability. University of Pennsylvania; 2011.",
    "gwet": (
        "Gwet KL. Computing inter-rater reliability and its variance in the presence of high agreement. Br J Math "
        "Stat Psychol 2008;61:29-48."
    ),
    "fleiss": "Fleiss JL. Measuring nominal scale agreement among many raters. Psychol Bull 1971;76:378-382.",
    "lme4": (
        "Bates D, Mächler M, Bolker B, Walker S. Fitting linear mixed-effects models using lme4. J Stat Softw "
        "2015;67(1):1-48."
    ),
    "satterthwaite": (
        "Satterthwaite FE. An approximate distribution of estimates of variance components. Biometrics Bull "
        "1946;2:110-114."
    ),
    "kuznetsova": (
        "Kuznetsova A, Brockhoff PB, Christensen RHB. lmerTest package: tests in linear mixed effects models. J Stat "
        "Softw 2017;82(13):1-26."
    ),
    "papineni": (
        "Papineni K, Roukos S, Ward T, Zhu WJ. BLEU: a method for automatic evaluation of machine "
        "translation. ACL 2002:311-318."
    ),
    "lin": (
        "Lin CY. ROUGE: a package for automatic evaluation of summaries. Text Summarization Branches Out, "
        "ACL 2004:74-81."
    ),
    "popovic": "Popović M. chrF: character n-gram F-score for automatic MT evaluation. WMT 2015:392-395.",
}


# Which references each method of the results document rests on (its key in `methods`).
METHOD_REFERENCES = {
    "proportions": ("wilson",),
    "degradation": ("fisher_pitman", "holm"),
    "realistic_difference": ("newcombe", "mcnemar", "fisher_pitman", "holm"),
    "mixed_model": ("lme4", "satterthwaite", "kuznetsova"),
    "realistic_mixed_model": ("lme4",),
    "equivalence_margin": ("wilson",),
    "order": ("fisher",),
    "agreement_initial_reads": ("wilson", "fleiss", "gwet", "krippendorff"),
    "agreement_release": ("krippendorff", "wilson"),
    "judges": ("wilson",),
    "metrics": ("papineni", "lin", "popovic"),
}


def summary(document: dict) -> list[tuple[str, str]]:
    """(heading, paragraph) per question the study answers, in the order a results section gives them."""
    tables = document["tables"]
    variations = variation_labels(document)
    out = []
    if "task1" in document["counts"]:
        out.append(("Realism (Task 1)", _realism(document, tables, variations)))
    if "task2" in document["counts"]:
        out.append(("Clinical equivalence (Task 2)", _equivalence(document, tables, variations)))
    out.append(("Agreement between radiologists", _agreement(document, tables)))
    return out


def summary_markdown(document: dict) -> str:
    lines = ["# Summary of the results", "", _scope(document), ""]
    for heading, paragraph in summary(document):
        lines += [f"## {heading}", "", paragraph, ""]
    return "\n".join(lines)


def _scope(document: dict) -> str:
    filters = document["filters"]
    where = "a live study" if document["source"] == "live" else "a release folder"
    dataset = f"dataset {filters['dataset']}" if filters["dataset"] else "all datasets"
    task = TASK_NAMES[filters["task"]] if filters["task"] else "both tasks"
    return (
        f"From {where}, {dataset}, {task}; every example with a consensus rating. 95% confidence intervals in brackets."
    )


def _percent(value) -> str:
    return "not computable (no examples)" if value is None else f"{100 * value:.1f}%"


def _interval(row: dict, low: str = "ci_low", high: str = "ci_high", *, percent: bool = False) -> str:
    if row.get(low) is None:
        return "no interval"
    show = _percent if percent else (lambda v: f"{v:.2f}")
    return f"95% CI {show(row[low])} to {show(row[high])}"


def _points(row: dict) -> str:
    if row.get("ci_low") is None:
        return "no interval"
    return f"95% CI {100 * row['ci_low']:+.1f} to {100 * row['ci_high']:+.1f} points"


def _p(value) -> str:
    if value is None:
        return "not tested"
    if value < 0.001:
        return "P < .001"
    return "P > .99" if value > 0.99 else f"P = {value:.3f}".replace("0.", ".", 1)


def _overall(rows: list[dict], **match) -> dict | None:
    for row in rows:
        if row["level"] == "overall" and all(row.get(key) == value for key, value in match.items()):
            return row
    return None


def _significant(rows: list[dict], variations: dict, estimate: str) -> list[str]:
    """The variations whose Holm-adjusted p is below .05, with their estimate."""
    return [
        f"{group_label('variation', row['group'], variations)} ({row[estimate]:+.2f}, "
        f"Holm-adjusted {_p(row['p_holm'])})"
        for row in rows
        if row["level"] == "variation" and row.get("p_holm") is not None and row["p_holm"] < 0.05
    ]


def _realism(document: dict, tables: dict, variations: dict) -> str:
    counts = document["counts"]["task1"]
    sentences = []
    original = _overall(tables["task1_realistic"], report_type="original")
    rewrite = _overall(tables["task1_realistic"], report_type="alternative")
    if original and rewrite and original["n"]:
        sentences.append(
            f"Of {original['n']} original reports, {original['k']} ({_percent(original['proportion'])}; "
            f"{_interval(original, percent=True)}) were rated Realistic by consensus, against {rewrite['k']} of "
            f"{rewrite['n']} rewrites ({_percent(rewrite['proportion'])}; {_interval(rewrite, percent=True)})."
        )
    else:
        sentences.append(f"No Task 1 pair has a consensus for both reports yet ({counts['examples']} examples rated).")
        return " ".join(sentences)
    difference = _overall(tables["task1_realistic_difference"])
    if difference and difference["difference"] is not None:
        sentences.append(
            f"Paired by report, the share rated Realistic differed by {100 * difference['difference']:+.1f} "
            f"percentage points, rewrite minus original, over {difference['n_pairs']} pairs from "
            f"{difference['n_exams']} exams ({_points(difference)}; {_p(difference['p_value'])}, "
            f"{difference['method'] or 'paired test'})."
        )
        margin = document.get("margins", {}).get("task1_realistic")
        if margin is not None:
            verdict = {
                "non-inferior": "non-inferior to the originals: the interval lies above",
                "inferior": "inferior to the originals: the interval lies below",
                "not shown": "neither shown non-inferior nor inferior: the interval crosses",
            }.get(difference["verdict"], "not judged against")
            sentences.append(f"The rewrites were {verdict} the non-inferiority margin of -{100 * margin:g} points.")
        else:
            sentences.append("No non-inferiority margin is set for the study, so no verdict is given.")
    degradation = _overall(tables["task1_degradation"])
    if degradation and degradation["mean_difference"] is not None:
        sentences.append(
            f"On the 0-2 scale (Realistic, Minor Issues, Major Issues) the rewrite's consensus was on average "
            f"{degradation['mean_difference']:+.2f} from the original's ({_interval(degradation)}; "
            f"{_p(degradation['p_value'])}, positive meaning less realistic)."
        )
        found = _significant(tables["task1_degradation"], variations, "mean_difference")
        sentences.append(
            "After Holm's adjustment across variations, the rewrites differed from their originals in "
            + "; ".join(found)
            + "."
            if found
            else "No single variation differed from its originals after Holm's adjustment across variations."
        )
    mixed = _overall(tables.get("task1_mixed_model", []))
    if mixed and mixed.get("estimate") is not None:
        sentences.append(
            f"With readers and exams as random effects, the difference per read was {mixed['estimate']:+.2f} "
            f"({_interval(mixed)}; {_p(mixed['p_value'])}; {mixed['n_reads']} reads by {mixed['n_readers']} readers)."
        )
    elif mixed and mixed.get("note"):
        sentences.append(f"Mixed model: {mixed['note']}.")
    return " ".join(sentences)


def _equivalence(document: dict, tables: dict, variations: dict) -> str:
    rows = tables["task2_proportions"]
    no_major = _overall(rows, measure="no_major_discrepancy")
    equivalent = _overall(rows, measure="equivalent")
    if not no_major or not no_major["n"]:
        return f"No Task 2 pair has a consensus yet ({document['counts']['task2']['examples']} examples rated)."
    sentences = [
        f"Of {no_major['n']} pairs, {no_major['k']} ({_percent(no_major['proportion'])}; "
        f"{_interval(no_major, percent=True)}) had no Major Discrepancy between the original and its rewrite, and "
        f"{equivalent['k']} ({_percent(equivalent['proportion'])}; {_interval(equivalent, percent=True)}) were "
        "rated Equivalent."
    ]
    margin = document.get("margins", {}).get("task2_major")
    if margin is not None:
        verdict = {
            "equivalent": (
                "were shown clinically equivalent: the lower bound of the share with no Major Discrepancy is above"
            ),
            "not shown": (
                "were not shown clinically equivalent: the lower bound of the share with no Major Discrepancy is not "
                "above"
            ),
        }.get(no_major["verdict"], "were not judged against")
        sentences.append(
            f"The rewrites {verdict} {100 - 100 * margin:g}% (an equivalence margin of {100 * margin:g}%)."
        )
    else:
        sentences.append("No equivalence margin is set for the study, so no verdict is given.")
    worst = [
        row for row in rows if row["level"] == "variation" and row["measure"] == "no_major_discrepancy" and row["n"]
    ]
    if worst:
        lowest = min(worst, key=lambda row: row["proportion"])
        sentences.append(
            f"The lowest share with no Major Discrepancy was that of "
            f"{group_label('variation', lowest['group'], variations)} ({lowest['k']} of {lowest['n']}, "
            f"{_percent(lowest['proportion'])})."
        )
    order = _overall(tables["task2_order"])
    if order and order["p_value"] is not None:
        sentences.append(
            f"Whether the original or the rewrite was shown as Report A made a difference of "
            f"{100 * order['difference']:+.1f} points in the share rated Equivalent (Fisher's exact test, "
            f"{_p(order['p_value'])})."
        )
    return " ".join(sentences)


AGREEMENT_MEASURES = {
    "live": (
        ("percent_agreement", "percent agreement"),
        ("gwet_ac1", "Gwet's AC1"),
        ("krippendorff_alpha_ordinal", "Krippendorff's ordinal alpha"),
    ),
    "release": (
        ("two_reads_agreed", "the first two reads agreed in"),
        ("krippendorff_alpha_ordinal_first_two_reads", "Krippendorff's ordinal alpha of the first two reads"),
    ),
}


def _agreement(document: dict, tables: dict) -> str:
    sentences = []
    source = "initial_reads" if document["source"] == "live" else "release"
    for task in ("task1", "task2"):
        if task not in document["counts"]:
            continue
        parts = []
        for measure, name in AGREEMENT_MEASURES["live" if source == "initial_reads" else "release"]:
            row = _overall(tables["agreement"], task=task, source=source, measure=measure)
            if row is None:
                continue
            if row["value"] is not None:
                value = (
                    _percent(row["value"])
                    if measure in ("percent_agreement", "two_reads_agreed")
                    else f"{row['value']:.2f}"
                )
                interval = _interval(row, percent=measure in ("percent_agreement", "two_reads_agreed"))
                parts.append(f"{name} {value} ({interval}; {row['n_examples']} examples)")
            elif row.get("range_low") is not None:
                parts.append(
                    f"{name} between {row['range_low']:.2f} and {row['range_high']:.2f} "
                    "(three-way splits leave it open)"
                )
            else:
                parts.append(f"{name} not computable ({row['note'] or 'too few examples'})")
        structure = _overall(tables["disagreement"], task=task)
        settled = ""
        if structure and structure["n_examples"]:
            settled = (
                f"; of {structure['n_examples']} examples, {structure['third_read_settled']} needed a third read and "
                f"{structure['adjudicated']} an adjudicator"
            )
        sentences.append(f"{TASK_NAMES[task]}: {', '.join(parts) or 'not computable yet'}{settled}.")
    return " ".join(sentences)


def methods(document: dict) -> str:
    """methods.md: each method as the document states it, its references, and the versions that computed it."""
    lines = ["# Methods", "", _scope(document), ""]
    described = dict(document["methods"])
    if document.get("metric_sensitivity"):
        described |= document["metric_sensitivity"]["methods"]
    cited = list(dict.fromkeys(key for name in described for key in METHOD_REFERENCES.get(name, ())))
    number = {key: index for index, key in enumerate(cited, start=1)}
    for name, text in described.items():
        references = ", ".join(str(number[key]) for key in METHOD_REFERENCES.get(name, ()))
        lines += [f"- **{name.replace('_', ' ').capitalize()}.** {text}" + (f" [{references}]" if references else "")]
    lines += ["", "## References", ""]
    lines += [f"{number[key]}. {REFERENCES[key]}" for key in cited]
    lines += ["", "## Software", ""]
    lines += [f"- Python {platform.python_version()}"] + [f"- {name} {_version(name)}" for name in PACKAGES]
    lines += [f"- Bootstrap seed: {document['seed']}", f"- Results format: {document['schema']}", ""]
    return "\n".join(lines)


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "(not installed)"
