"""Routine notes: the bulk of a real agent's store (deploy logs, dependency bumps, reviews,
stand-ups, CI runs, reading notes), generated from hand-written phrases with a seeded RNG.

They fill the 300 store (on top of the hand-written notes) and make the 3,000 store's
distractors. They share the projects' vocabulary (deploy, staging, tests, cache, review)
but state no fact that a query asks about: generate.py checks that none of them holds every
content word of a labelled query or any distinctive word of a nothing-relevant query.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

from notes import PEOPLE, SERVICES

START = date(2026, 5, 25)
END = date(2026, 11, 22)

DEPLOY_CHANGES = [
    "the base image moved to bookworm-slim",
    "a new readiness endpoint /readyz",
    "log level back to info after the debugging week",
    "old feature flags removed",
    "a queue depth gauge in the metrics",
    "a distroless image, 40 MB smaller",
    "the memory limit set to 512Mi",
    "trace context propagated to outgoing calls",
    "the legacy v1 routes removed",
    "worker concurrency tuned to 8",
    "graceful shutdown waits 20 s for in-flight requests",
    "request logs sampled at 10 %",
    "a clearer error message for expired sessions",
    "dependency updates only",
    "the admin page paginates at 50 rows",
    "CSV export streams instead of buffering",
    "healthcheck no longer hits the database",
    "translations refreshed",
    "startup time down from 9 s to 4 s",
    "a retry on 503 from the upstream",
]
DEPLOY_OUTCOMES = [
    "no errors in the first hour",
    "error rate flat",
    "p95 latency unchanged",
    "smoke tests green",
    "dashboards look normal",
    "a few 499s during the switch, expected",
    "CPU down slightly",
    "nothing unusual in the logs",
]
ENVS = ["production", "staging", "the canary pool", "production (EU)", "production (US)"]

LIBS = [
    ("requests", "2.31", "2.32"), ("pydantic", "2.6", "2.8"), ("sqlalchemy", "2.0.29", "2.0.31"),
    ("grpc-go", "1.62", "1.64"), ("zap", "1.26", "1.27"), ("react-native-reanimated", "3.8", "3.10"),
    ("turf", "6.5", "7.0"), ("astro", "4.5", "4.9"), ("boto3", "1.34.60", "1.34.90"),
    ("django", "4.2.11", "4.2.13"), ("celery", "5.3", "5.4"), ("axios", "1.6", "1.7"),
    ("tokio", "1.36", "1.38"), ("serde", "1.0.197", "1.0.203"), ("pytest", "8.1", "8.2"),
    ("eslint", "8.57", "9.3"), ("typescript", "5.4", "5.5"), ("urllib3", "2.2.1", "2.2.2"),
    ("jest", "29.6", "29.7"), ("go-chi", "5.0.11", "5.0.12"), ("prometheus-client", "0.20", "0.21"),
    ("lodash", "4.17.20", "4.17.21"), ("numpy", "1.26", "2.0"), ("pillow", "10.2", "10.3"),
]  # fmt: skip
BUMP_OUTCOMES = [
    "tests green, merged",
    "one deprecation warning fixed in passing",
    "changelog lists no breaking changes",
    "needed a small fix in the type hints",
    "held back one minor version because of an open upstream regression",
    "lockfile regenerated",
    "Renovate opened it, I only had to approve",
]
REVIEW_COMMENTS = [
    "asked to split the schema change from the code change",
    "suggested a table-driven test",
    "prefer full words over abbreviations in names",
    "errors need wrapping with context",
    "approved with a nit about log wording",
    "asked for numbers before merging the optimisation",
    "the new config option needs a default and a doc line",
    "too many mocks; asked for one real round-trip test",
    "approved; good commit messages",
    "the function does two things, asked to split it",
    "asked to delete the commented-out code",
    "requested a changelog entry",
]
STANDUP_TASKS = [
    "cleaning up unused feature flags in {svc}",
    "writing the runbook for {svc}",
    "pairing with {p} on the {svc} test suite",
    "updating the Grafana dashboard for {svc}",
    "triaging the {proj} backlog",
    "moving the {svc} pipeline to the new runner image",
    "reviewing {p}'s pull request for {svc}",
    "adding type hints to the {svc} client",
    "reading the {proj} architecture notes",
    "tidying the {svc} README",
    "splitting the {svc} settings module",
    "sketching the Q1 roadmap for {proj}",
    "answering support questions about {svc}",
    "porting a script of {svc} from bash to Python",
    "renaming the {svc} metrics to the new convention",
]
STANDUP_STATUS = ["on track", "halfway", "done by Friday", "blocked on a review", "almost done",
                  "waiting for {p}", "started today"]  # fmt: skip
CI_RESULTS = [
    "{svc} main build green in 7 min",
    "{svc} build took 14 min; cache misses after the image change",
    "{svc} lint job failed on an unused import, fixed",
    "{svc} nightly job green",
    "{svc} coverage at 81 %",
    "{svc} docker build cached, 2 min",
]
READING = [
    ("an article on structured logging", "log events, not sentences"),
    ("a post about writing good RFCs", "state the problem before the solution"),
    ("a talk on SLOs", "alert on burn rate, not on single errors"),
    ("a chapter on domain-driven design", "keep the ubiquitous language in code"),
    ("a blog post on code review etiquette", "ask questions instead of giving orders"),
    ("a paper on tail latency", "hedged requests cut p99"),
    ("a thread about monorepos", "tooling decides whether they work"),
    ("an essay on technical debt", "name it and budget for it"),
    ("a post about feature toggles", "remove them on a schedule"),
    ("notes on property-based testing", "generators find edge cases examples miss"),
]
DASHBOARD = [
    "added a panel for request rate by status code to the {svc} dashboard",
    "moved the {svc} latency panels to a heatmap",
    "annotated releases on the {svc} dashboard",
    "added a saturation row to the {svc} dashboard",
]
ZH_TASKS = ["整理 {svc} 的文档", "写 {svc} 的单元测试", "重构 {svc} 的配置模块", "看 {p} 的代码评审",
            "更新 {proj} 的周报", "清理 {svc} 的旧分支"]  # fmt: skip
JA_TASKS = ["{svc} のテストを整理中", "{svc} の README を更新", "{p} さんのレビュー対応",
            "{proj} のバックログを整理", "{svc} のログ出力を見直し"]  # fmt: skip


def _day(rng: random.Random) -> date:
    return START + timedelta(days=rng.randrange((END - START).days + 1))


class Versions:
    """Unique version numbers per service, so that no two deploy logs name the same one."""

    def __init__(self) -> None:
        self.used: set[tuple[str, str]] = set()

    def new(self, rng: random.Random, svc: str) -> str:
        while True:
            v = f"{rng.randint(1, 6)}.{rng.randint(0, 30)}.{rng.randint(0, 12)}"
            if (svc, v) not in self.used:
                self.used.add((svc, v))
                return v


def routine(rng: random.Random, versions: Versions, kinds: list[str]) -> dict[str, Any]:
    """One routine note; `kinds` is the pool of templates to draw from."""
    kind = rng.choice(kinds)
    proj = rng.choice(sorted(SERVICES))
    svc = rng.choice(SERVICES[proj])
    p = rng.choice(PEOPLE)
    day = _day(rng)
    category = "log"
    if kind == "deploy":
        env = rng.choice(ENVS)
        text = (
            f"Deployed {svc} {versions.new(rng, svc)} to {env}: {rng.choice(DEPLOY_CHANGES)}; "
            f"{rng.choice(DEPLOY_OUTCOMES)}."
        )
        category = "deploy"
    elif kind == "bump":
        lib, a, b = rng.choice(LIBS)
        text = f"Bumped {lib} from {a} to {b} in {svc}; {rng.choice(BUMP_OUTCOMES)}."
        category = "maintenance"
    elif kind == "review":
        text = (
            f"Reviewed PR #{rng.randint(100, 4999)} in {svc} by {p}: "
            f"{rng.choice(REVIEW_COMMENTS)}."
        )
        category = "review"
    elif kind == "standup":
        task = rng.choice(STANDUP_TASKS).format(svc=svc, p=p, proj=proj)
        status = rng.choice(STANDUP_STATUS).format(p=rng.choice(PEOPLE))
        text = f"Standup: {p} is {task}; {status}."
        category = "standup"
    elif kind == "ci":
        text = "CI: " + rng.choice(CI_RESULTS).format(svc=svc) + "."
        category = "ci"
    elif kind == "reading":
        what, takeaway = rng.choice(READING)
        text = f"Read {what}; takeaway: {takeaway}."
        category, proj = "learning", None  # type: ignore[assignment]
    elif kind == "dashboard":
        text = rng.choice(DASHBOARD).format(svc=svc).capitalize() + "."
        category = "observability"
    elif kind == "zh":
        text = f"站会：{p} 在" + rng.choice(ZH_TASKS).format(svc=svc, p=rng.choice(PEOPLE), proj=proj)
        text += "，" + rng.choice(["进展顺利。", "预计周五完成。", "等待评审。", "今天开始。"])
        category = "standup"
    else:  # ja
        text = f"朝会：{p} は " + rng.choice(JA_TASKS).format(svc=svc, p=rng.choice(PEOPLE), proj=proj)
        text += "。" + rng.choice(["順調。", "金曜日に完了予定。", "レビュー待ち。"])
        category = "standup"
    return {"content": text, "project": proj, "category": category, "date": day.isoformat()}
