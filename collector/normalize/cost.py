"""What an LLM call cost, in US dollars, from its model and token usage, by the maintained
price table of the `genai-prices` package (historical prices: the call's own date picks them).

Offline by design: `genai_prices.calc_price` reads the data snapshot bundled with the
installed package. Only `genai_prices.UpdatePrices` fetches prices from the network, and
the collector never starts it (no collector needs to reach the internet); a newer table
comes with a newer package version.

An unknown model, or a call without token usage, has no cost (None), never 0.
"""
from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import genai_prices
from genai_prices import Usage
from genai_prices.types import TieredPrices

from tracefix.collector.normalize.dialects import first_value, int_value

# Token counts beyond input and output, by dialect (GenAI semantic conventions, OpenLLMetry,
# OpenInference). As the conventions say, input tokens include the cached ones and output
# tokens the reasoning ones; genai-prices counts them the same way.
CACHE_READ_TOKEN_KEYS = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
                         "llm.token_count.prompt_details.cache_read")
CACHE_WRITE_TOKEN_KEYS = ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens",
                          "llm.token_count.prompt_details.cache_write")
REASONING_TOKEN_KEYS = ("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens",
                        "llm.token_count.completion_details.reasoning")

_NS_PER_DAY = 86_400 * 1_000_000_000


def span_cost(attrs: dict[str, Any], model: str | None, provider: str | None,
              input_tokens: int | None, output_tokens: int | None, start_ns: int) -> float | None:
    """The cost of one LLM span in USD, or None when its model is not in the price table or
    it reported no token usage."""
    if model is None or (input_tokens is None and output_tokens is None):
        return None
    # prices change from one date to the next, never within a day: the caches key on the day
    day = start_ns // _NS_PER_DAY
    if _rates(model, provider, day) is None:  # an unknown model: its other counts go unread
        return None
    cached = int_value(first_value(attrs, CACHE_READ_TOKEN_KEYS))
    written = int_value(first_value(attrs, CACHE_WRITE_TOKEN_KEYS))
    reasoning = int_value(first_value(attrs, REASONING_TOKEN_KEYS))
    return call_cost(model, provider, input_tokens, output_tokens, cached, written, reasoning, day)


def call_cost(model: str, provider: str | None, input_tokens: int | None, output_tokens: int | None,
              cache_read_tokens: int | None, cache_write_tokens: int | None, reasoning_tokens: int | None,
              day: int) -> float | None:
    """The price-table cost of a call with this usage on this day (days since 1970, UTC)."""
    rates = _rates(model, provider, day)
    if rates is None:
        return None
    counts = (input_tokens or 0, output_tokens or 0, cache_read_tokens or 0, cache_write_tokens or 0,
              reasoning_tokens or 0)
    if rates is _TIERED or counts[2] + counts[3] > counts[0]:
        return _priced(model, provider, day, counts)
    return sum(n * rate for n, rate in zip(counts, rates))


# A model's price per token of each count, from the package's own calculation: with prices that
# do not depend on the volume (no tiers) a call's price is linear in its counts, and multiplying
# costs ~0.3 us where `calc_price` costs ~55 us (it resolves the model's price units at every
# call), which at one LLM call in three spans doubled normalize's time per span (bench/normalize.py).
_MTOK = 1_000_000
_TIERED = ()
_UNIT_USAGES = (  # one count at a time, each as the package reads it (cached tokens are input tokens)
    ((_MTOK, 0, 0, 0, 0), None), ((0, _MTOK, 0, 0, 0), None),
    ((_MTOK, 0, _MTOK, 0, 0), (_MTOK, 0, 0, 0, 0)), ((_MTOK, 0, 0, _MTOK, 0), (_MTOK, 0, 0, 0, 0)),
    ((0, _MTOK, 0, 0, _MTOK), (0, _MTOK, 0, 0, 0)))


@lru_cache(maxsize=4096)
def _rates(model: str, provider: str | None, day: int) -> tuple[float, ...] | None:
    """USD per input, output, cache-read, cache-write and reasoning token (the last three as
    the difference they make), `_TIERED` when the price depends on volume, None when unknown."""
    found = _model_info(model, provider)
    if found is None:
        return None
    prices = found[1].get_prices(_day_start(day))
    if any(isinstance(value, TieredPrices) for value in vars(prices).values()):
        return _TIERED
    rates = []
    for counts, base in _UNIT_USAGES:
        priced = _priced(model, provider, day, counts)
        if priced is None:
            return None
        without = _priced(model, provider, day, base) if base else 0.0
        rates.append((priced - (without or 0.0)) / _MTOK)
    return tuple(rates)


@lru_cache(maxsize=8192)
def _priced(model: str, provider: str | None, day: int, counts: tuple[int, int, int, int, int]) -> float | None:
    """The package's own calculation (genai_prices: ModelInfo.calc_price)."""
    found = _model_info(model, provider)
    if found is None:
        return None
    provider_info, model_info = found
    input_tokens, output_tokens, cache_read, cache_write, reasoning = counts
    usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cache_read or None,
                  cache_write_tokens=cache_write or None, output_reasoning_tokens=reasoning or None)
    try:
        price = model_info.calc_price(usage, provider_info, genai_request_timestamp=_day_start(day))
    except (ValueError, LookupError):  # usage the model's prices cannot read (e.g. cached > input)
        return None
    return float(price.total_price)


def _day_start(day: int) -> datetime:
    return datetime.fromtimestamp(day * 86_400, tz=timezone.utc)


@lru_cache(maxsize=1024)
def _model_info(model: str, provider: str | None) -> tuple[Any, Any] | None:
    """The price table's provider and model for a span's model name, or None. The span's
    provider name is tried first (the conventions' names: openai, anthropic, ...), then the
    model name alone (a provider name the table does not know, e.g. a gateway's)."""
    snapshot = genai_prices.data_snapshot.get_snapshot()
    for provider_id in ((provider, None) if provider else (None,)):
        try:
            return snapshot.find_provider_model(model, None, provider_id, None)
        except LookupError:
            continue
    return None


__all__ = ["CACHE_READ_TOKEN_KEYS", "CACHE_WRITE_TOKEN_KEYS", "REASONING_TOKEN_KEYS", "call_cost", "span_cost"]
