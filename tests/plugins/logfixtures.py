"""Helpers for the log-parser tests: where the fixtures are, and running a parser over one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from tprimat.contract.records import LogFact, ParseIssue, is_memory_only
from tprimat.result.collect import EventCollector
from tprimat.result.schema import IterationRecord

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"

Parser = Callable[[Iterable[str], str], Iterator[Any]]


def events_of(parser: Parser, path: Path) -> list[Any]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return list(parser(handle, path.name))


def collect(parser: Parser, path: Path) -> EventCollector:
    return EventCollector().consume(events_of(parser, path))


def timed(collector: EventCollector) -> list[IterationRecord]:
    """Records of iteration lines (not memory-only readings)."""
    return [r for r in collector.records if not is_memory_only(r)]


def records_of(events: list[Any]) -> list[IterationRecord]:
    return [e for e in events if isinstance(e, IterationRecord)]


def issues_of(events: list[Any]) -> list[ParseIssue]:
    return [e for e in events if isinstance(e, ParseIssue)]


def facts_of(events: list[Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for event in events:
        if isinstance(event, LogFact):
            facts.setdefault(event.key, event.value)
    return facts
