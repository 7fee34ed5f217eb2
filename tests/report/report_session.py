"""A real session for the report tests: a message log with hostile text and the CLI runner."""
from __future__ import annotations

import subprocess
import sys

# Every kind of text that could break out of its place in a page: tags, attributes,
# Markdown fences and table pipes, non-ASCII, and a message long enough to be clipped.
HOSTILE_LOG = {
    "task": "Refund order 42 <script>alert('task')</script> & close the ticket",
    "ground_truth": "refund order 42",
    "history": [
        {"name": "Orchestrator", "content": "PLAN: 1. Refunder: refund order 42. 2. answer the customer."},
        {"name": "Refunder", "content": "Calling refund(order=24) </pre><img src=x onerror=alert(1)> "
                                        "```py\nprint('fence')\n``` | a | b |"},
        {"name": "Tool", "content": "Error: order 24 not found"},
        {"name": "Refunder", "content": "Calling refund(order=24) again. " + "padding " * 800},
        {"name": "Tool", "content": "Error: order 24 not found"},
        {"name": "Orchestrator", "content": "FINAL ANSWER: refunded (it was not) ünïcødé ✓"},
    ],
}


def tracefix(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracefix.cli", *args], capture_output=True, text=True,
                          timeout=180, check=check)
