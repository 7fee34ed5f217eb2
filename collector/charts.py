"""What the dashboards chart (collector.store.dashboard computes it): each chart's title,
unit, the rows one point aggregates and its SQL aggregate; the groupings; the time ranges a
person picks. Plain data, so the API's schemas read the names without the store."""
from __future__ import annotations

from dataclasses import dataclass

GROUPINGS = ("service", "model", "agent", "tool")
MAX_GROUPS = 6  # series per chart: the groups with the most sessions or calls, the rest as OTHER
OTHER = "(other)"
MAX_BUCKETS = 400
# the time ranges a person picks (seconds back from now); "all": from the first session to the last
RANGES = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400, "all": None}


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str  # how the values read: "count", "share" (0..1), "tokens", "usd", "ms"
    rows: str  # "sessions", "llm" (LLM calls) or "tool" (tool calls): what one point aggregates
    value: str  # the SQL aggregate over the rows of one bucket and group


CHARTS = {
    "sessions": Chart("Sessions", "count", "sessions", "count(*)"),
    "failure_rate": Chart("Failure rate", "share", "sessions", "avg(CASE WHEN outcome = 'failure' THEN 1 ELSE 0 END)"),
    "thumbs_down_rate": Chart("Thumbs-down rate (session or step)", "share", "sessions",
                              "avg(CASE WHEN thumbs_down THEN 1 ELSE 0 END)"),
    "tokens": Chart("Tokens (input + output)", "tokens", "llm", "sum(tokens)"),
    "cost": Chart("Cost (USD, known prices)", "usd", "llm", "sum(cost_usd)"),
    "latency_p50": Chart("LLM call latency p50", "ms", "llm", "quantile_cont(ms, 0.5)"),
    "latency_p95": Chart("LLM call latency p95", "ms", "llm", "quantile_cont(ms, 0.95)"),
    "tool_error_rate": Chart("Tool error rate", "share", "tool", "avg(CASE WHEN failed THEN 1 ELSE 0 END)"),
}
