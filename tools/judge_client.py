#!/usr/bin/env python3
"""A reference client for automated judges: fetch the next item, rate it, repeat, through the reader API.

Standard library only: copy this file anywhere. A judge is a function from the item a reader's
API client receives (the blinded JSON of GET /api/reading/next/: task, question, context,
reports, labels) to a (rating, rationale) pair. `rule_based_judge` ships with it (the demo and the
tests use it); write your own with the same signature.

    python tools/judge_client.py --url http://127.0.0.1:8000 --token "$TOKEN" [--task realism] [--study SLUG]

The token is the judge account's (`manage.py create_user NAME --role judge --token`); a
coordinator enrols the judge in a study first (`manage.py enrol_judge`, the study's Automated
judges page, or POST /api/studies/<slug>/judges/).

Wiring an LLM behind an HTTP endpoint (documented, never called by the tests or the demo; nothing
in ReadingRoom reaches the internet). For an OpenAI-compatible chat endpoint:

    def llm_judge(item):
        reports = "\\n\\n".join(
            f"{r['heading']}\\nFindings: {r['findings']}\\nImpression: {r['impression']}" for r in item["reports"]
        )
        labels = "\\n".join(f"- {l['value']}: {l['label']}: {l['definition']}" for l in item["labels"])
        prompt = (
            f"{item['question']}\\n\\nContext: {json.dumps(item['context'])}\\n\\n{reports}\\n\\n"
            f"Answer with JSON {{\\"rating\\": <one value below>, \\"rationale\\": <one sentence>}}.\\n{labels}"
        )
        body = json.dumps({"model": "my-model", "messages": [{"role": "user", "content": prompt}],
                           "response_format": {"type": "json_object"}}).encode()
        request = urllib.request.Request("https://llm.example.org/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {os.environ['LLM_KEY']}"})
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = json.loads(json.loads(response.read())["choices"][0]["message"]["content"])
        return answer["rating"], answer.get("rationale", "")

    run(HttpTransport(url, token), llm_judge)

A rating the server refuses (a label of the other task, a missing rationale) is reported and the
client stops: fix the judge and run it again; rated items are never asked for twice.

If the coordinator enrolled the judge to practise, the API first answers 409 {"required": "guide"}
or {"required": "practice"}, as it does for a reader: the client fetches the study's guide and
confirms it (hand its text to your judge with `read_guide`), then rates the practice items with the
same judge function (each answer holds the reference rating), and carries on with the real items.
"""

import argparse
import json
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

TASKS = ("realism", "equivalence")
Judge = Callable[[dict], tuple[str, str]]


class Transport(Protocol):
    def get(self, path: str) -> tuple[int, dict | list | None]: ...

    def post(self, path: str, body: dict) -> tuple[int, dict | list | None]: ...


class HttpTransport:
    """The reader API over HTTP(S), with the judge's token."""

    def __init__(self, url: str, token: str, *, timeout: float = 60) -> None:
        if not url.startswith(("http://", "https://")):
            raise JudgeClientError(f"--url {url!r}: give ReadingRoom's http:// or https:// address.")
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def _send(self, request: urllib.request.Request) -> tuple[int, dict | list | None]:
        request.add_header("Authorization", f"Token {self.token}")
        request.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the user's URL
                data = response.read()
                return response.status, json.loads(data) if data else None
        except urllib.error.HTTPError as error:
            data = error.read()
            return error.code, json.loads(data) if data else None

    def get(self, path: str) -> tuple[int, dict | list | None]:
        return self._send(urllib.request.Request(self.url + path))  # noqa: S310 - http(s) only, checked above

    def post(self, path: str, body: dict) -> tuple[int, dict | list | None]:
        data = json.dumps(body).encode("utf-8")
        return self._send(
            urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})  # noqa: S310
        )


class JudgeClientError(Exception):
    """The server refused something; the message has its answer."""


@dataclass
class RunReport:
    rated: dict[str, int]
    practised: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.rated.values())


def run(
    transport: Transport,
    judge: Judge,
    *,
    tasks: tuple[str, ...] = TASKS,
    study: str | None = None,
    on_rated: Callable[[dict, str], None] | None = None,
    read_guide: Callable[[dict], None] | None = None,
) -> RunReport:
    """Rate every open item of the tasks (next -> judge -> rating) until the API answers 204.

    When the API asks for the study's guide or practice round first (409), confirm the guide (after
    handing it to read_guide, if given: the JSON of GET /api/reading/guide/) or rate the practice
    items with the judge, then go on.
    """
    rated = dict.fromkeys(tasks, 0)
    practised = dict.fromkeys(tasks, 0)
    for task in tasks:
        query = f"?task={task}" + (f"&study={study}" if study else "")
        done_step = None
        while True:
            status, item = transport.get(f"/api/reading/next/{query}")
            if status == 204:
                break
            if status == 409 and isinstance(item, dict) and item.get("required") in ("guide", "practice"):
                step = (item["required"], item["study"], item["task"])
                if step == done_step:  # done, yet asked again: stop rather than loop
                    raise JudgeClientError(f"GET next ({task}): still {status} {item}")
                if item["required"] == "guide":
                    _confirm_guide(transport, item["study"], read_guide)
                else:
                    practised[task] += _practise(transport, judge, item["study"], item["task"])
                done_step = step
                continue
            if status != 200 or not isinstance(item, dict):
                raise JudgeClientError(f"GET next ({task}): {status} {item}")
            rating, rationale = judge(item)
            body = {"rating": rating, "rationale": rationale, "form_token": item["form_token"]}
            status, answer = transport.post(f"/api/reading/{item['id']}/rating/", body)
            if status not in (200, 201):
                raise JudgeClientError(f"rating of item {item['id']} ({task}) refused: {status} {answer}")
            rated[task] += 1
            done_step = None
            if on_rated:
                on_rated(item, rating)
    return RunReport(rated, practised)


def _confirm_guide(transport: Transport, study: str, read_guide: Callable[[dict], None] | None) -> None:
    status, guide = transport.get(f"/api/reading/guide/?study={study}")
    if status != 200 or not isinstance(guide, dict):
        raise JudgeClientError(f"GET guide ({study}): {status} {guide}")
    if read_guide:
        read_guide(guide)
    status, answer = transport.post("/api/reading/guide/", {"study": study, "version": guide["version"]})
    if status not in (200, 201):
        raise JudgeClientError(f"confirming the guide of {study} refused: {status} {answer}")


def _practise(transport: Transport, judge: Judge, study: str, task: str) -> int:
    """Rate the practice items due (same judge, same blinded item shape) until the API answers 204."""
    practised = 0
    while True:
        status, item = transport.get(f"/api/reading/practice/?study={study}&task={task}")
        if status == 204:
            return practised
        if status != 200 or not isinstance(item, dict):
            raise JudgeClientError(f"GET practice ({study}, {task}): {status} {item}")
        rating, rationale = judge(item)
        body = {"rating": rating, "rationale": rationale, "form_token": item["form_token"]}
        status, answer = transport.post(f"/api/reading/practice/{item['id']}/rating/", body)
        if status not in (200, 201):
            raise JudgeClientError(f"rating of practice item {item['id']} ({task}) refused: {status} {answer}")
        practised += 1


# --- A rule-based judge: a transparent baseline, not a clinical tool ---------------------------

WORD = re.compile(r"[a-z0-9]+")
HEDGES = {"may", "might", "possible", "possibly", "likely", "probable", "probably", "suggest", "suggests", "cannot",
          "suspicious", "questionable", "versus", "vs"}  # fmt: skip
NEGATIONS = {"no", "not", "without", "negative", "absent", "free", "clear", "resolved", "normal", "unremarkable"}
SIDES = {"left", "right", "bilateral"}


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _report_words(report: dict) -> list[str]:
    return _words(f"{report['findings']} {report['impression']}")


def rule_based_judge(item: dict) -> tuple[str, str]:
    """Realism: Realistic unless the report is empty, very short or very long, or hedges heavily.
    Equivalence: compare the two reports' words: laterality or negation that changes -> Major,
    hedging or wording that changes -> Minor, nearly the same words -> Equivalent."""
    values = [label["value"] for label in item["labels"]]
    if item["task"] == "realism":
        words = _report_words(item["reports"][0])
        hedges = sum(word in HEDGES for word in words)
        if len(words) < 3:
            return values[2], "The report is too short to be a radiologist's report."
        if len(words) > 400 or hedges > max(3, len(words) // 8):
            return values[1], "Unusually long or heavily hedged wording."
        return values[0], ""
    first, second = (_report_words(report) for report in item["reports"])
    a, b = set(first), set(second)
    if (a & SIDES) != (b & SIDES):
        return values[2], "The reports name different sides."
    if len(a & NEGATIONS) != len(b & NEGATIONS) and abs(len(first) - len(second)) > 10:
        return values[2], "A finding is negated in one report and not in the other."
    overlap = len(a & b) / max(len(a | b), 1)
    if overlap >= 0.8 and (a & HEDGES) == (b & HEDGES):
        return values[0], ""
    return values[1], f"Same content in different wording (word overlap {overlap:.0%})."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="ReadingRoom's address, e.g. http://127.0.0.1:8000")
    parser.add_argument("--token", required=True, help="The judge account's API token.")
    parser.add_argument("--task", action="append", choices=TASKS, help="Repeat for both (default: both).")
    parser.add_argument("--study", help="Only this study (slug); default: every study the judge is enrolled in.")
    options = parser.parse_args(argv)
    try:
        report = run(
            HttpTransport(options.url, options.token),
            rule_based_judge,
            tasks=tuple(options.task or TASKS),
            study=options.study,
        )
    except (JudgeClientError, urllib.error.URLError) as error:
        print(f"Stopped: {error}", file=sys.stderr)
        return 1
    print(
        ", ".join(
            f"{task}: {n} rated" + (f" ({report.practised[task]} practice)" if report.practised.get(task) else "")
            for task, n in report.rated.items()
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
