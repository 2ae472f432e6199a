"""A webhook subscription's deliveries (`EventService.deliveries`) in words, once, for the CLI
(`gate events deliveries`) and the workbench's Events page. `text` makes each value a receiver
or a tenant wrote safe for where it is shown (the page passes `md_text`; the terminal, `str`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.reports.numbers import rate

SHOWN_FAILURES = 5


def delivery_lines(report: dict[str, Any], text: Callable[[str], str] = str) -> list[str]:
    sub = report["subscription"]
    outcome = ("no attempts yet" if report["success_rate"] is None
               else f"{rate(report['success_rate'])} of {report['attempts']:,} attempts succeeded")
    head = f"{text(sub['subscription_id'])} → {text(sub['url'])} ({text(sub['status'])})"
    if sub["disabled_reason"]:
        head += f", disabled: {text(sub['disabled_reason'])}"
    lines = [head,
             f"- {outcome}; lag {report['lag']:,} event(s); {report['pending_replays']:,} replay(s) pending",
             ("- latency: no successful attempt yet" if report["latency_ms_p50"] is None else
              f"- latency p50 {report['latency_ms_p50']} ms, max {report['latency_ms_max']} ms "
              f"(last {report['latency_window']} successful attempts)"),
             f"- event types: {text(', '.join(sub['event_types']))}"]
    for failure in report["last_failures"][:SHOWN_FAILURES]:
        lines.append(f"- failed {text(failure['attempted_at'])}, event {failure['seq']}, status "
                     f"{failure['status_code']}: {text(failure['excerpt'])}")
    return lines
