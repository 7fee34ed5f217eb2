"""The collector's cost of an LLM call (tracefix.collector.normalize.cost) is the price table's:
its per-token shortcut equals genai-prices' own `calc_price` on random usages of models with
flat and with tiered prices; and it reads the table bundled with the package, never the
network (a process whose sockets cannot connect prices calls all the same)."""
from __future__ import annotations

import random
import subprocess
import sys
from datetime import datetime, timezone

import genai_prices
import pytest

from tracefix.collector.normalize.cost import call_cost

DAY = 20_400  # 2025-11-08
MODELS = [("gpt-4o-mini", "openai"), ("gpt-4o", "openai"), ("o3-mini", "openai"),
          ("claude-3-5-sonnet", "anthropic"), ("claude-sonnet-4-5", "anthropic"),
          ("gemini-2.5-pro", "google"),  # tiered: dearer above 200k input tokens
          ("gpt-4o-mini", "a-gateway-nobody-knows")]


@pytest.mark.parametrize("model,provider", MODELS)
def test_the_cost_is_what_genai_prices_calculates(model, provider):
    rng = random.Random(model)
    when = datetime.fromtimestamp(DAY * 86_400, tz=timezone.utc)
    for _ in range(150):
        inputs = rng.randrange(0, 400_000)
        outputs = rng.randrange(0, 30_000)
        cached = rng.randrange(0, inputs + 1) if rng.random() < 0.5 else None
        written = rng.randrange(0, inputs - (cached or 0) + 1) if rng.random() < 0.3 else None
        reasoning = rng.randrange(0, outputs + 1) if rng.random() < 0.5 else None
        usage = genai_prices.Usage(input_tokens=inputs, output_tokens=outputs, cache_read_tokens=cached,
                                   cache_write_tokens=written, output_reasoning_tokens=reasoning)
        known = provider in ("openai", "anthropic", "google")
        want = float(genai_prices.calc_price(usage, model, provider_id=provider if known else None,
                                             genai_request_timestamp=when).total_price)
        got = call_cost(model, provider, inputs, outputs, cached, written, reasoning, DAY)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15), (inputs, outputs, cached, written, reasoning)


def test_an_unknown_model_has_no_cost():
    assert call_cost("scripted-bank-model", "openai", 1000, 100, None, None, None, DAY) is None


def test_prices_come_from_the_bundled_table_without_a_network():
    code = """
import socket
def refuse(*args, **kwargs):
    raise OSError("no network in this test")
socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = refuse
from tracefix.collector.normalize.cost import call_cost
print(call_cost("gpt-4o-mini", "openai", 1_000_000, 1_000_000, None, None, None, 20400))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert float(out.stdout) == pytest.approx(0.15 + 0.60)  # $ per million input + output tokens
