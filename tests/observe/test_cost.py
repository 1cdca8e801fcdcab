"""``dsh_llm.observe.cost``: a user's price table turns usage into a cost; an
unknown price or an unreported count gives ``None``, never a guess."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_llm.assembler import collect
from dsh_llm.config import PluginConfigError
from dsh_llm.observe.cost import CallCost
from dsh_llm.observe.cost import Cost
from dsh_llm.observe.cost import ModelPrice
from dsh_llm.observe.cost import PriceConfigError
from dsh_llm.observe.cost import PriceTable
from dsh_llm.observe.cost import cost_middleware
from dsh_llm.observe.cost import format_cost
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.routing import retrying
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer

from .replies import answer
from .replies import options
from .replies import status

TABLE = PriceTable.from_config(
    {
        "model-a": {"input": 2.0, "cacheRead": 0.5, "cacheWrite": 2.5, "output": 8.0},
        "local/model-a": {"input": 1.0, "cacheRead": 0.25, "output": 4.0},
        "no-cache-price": {"input": 1.0, "output": 3.0},
    },
    currency="EUR",
)


def _usage(**counts: int | None) -> TokenUsage:
    counts.setdefault("input_tokens", 1_000_000)
    counts.setdefault("output_tokens", 500_000)
    return TokenUsage(**counts)


def test_cost_adds_each_part_at_its_price() -> None:
    usage = _usage(cache_read_tokens=2_000_000, cache_write_tokens=400_000)

    cost = TABLE.cost(usage, "model-a")

    assert cost == Cost(
        total=2.0 + 1.0 + 1.0 + 4.0,
        input=2.0,
        cache_read=1.0,
        cache_write=1.0,
        output=4.0,
        currency="EUR",
    )
    assert format_cost(cost) == "8.000000 EUR"


def test_provider_model_prices_come_first() -> None:
    cost = TABLE.cost(_usage(), "model-a", provider="local")

    assert cost is not None
    assert cost.total == 1.0 + 2.0
    other = TABLE.cost(_usage(), "model-a", provider="elsewhere")
    assert other is not None
    assert other.total == 2.0 + 4.0


@pytest.mark.parametrize(
    ("usage", "model"),
    [
        (_usage(), "unpriced-model"),
        (None, "model-a"),
        (_usage(input_tokens=None), "model-a"),
        (_usage(output_tokens=None), "model-a"),
        # A billed cache read without a cache-read price is not priced as input.
        (_usage(cache_read_tokens=10), "no-cache-price"),
        (_usage(cache_write_tokens=10), "local/model-a"),
    ],
)
def test_an_unknown_price_or_count_is_none(
    usage: TokenUsage | None, model: str
) -> None:
    assert TABLE.cost(usage, model) is None
    assert format_cost(TABLE.cost(usage, model)) is None


def test_unreported_or_zero_cache_counts_need_no_price() -> None:
    for usage in (_usage(), _usage(cache_read_tokens=0, cache_write_tokens=0)):
        cost = TABLE.cost(usage, "no-cache-price")
        assert cost is not None
        assert cost.total == 1.0 + 1.5


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"m": {"input": -1}}, r"^prices\.m\.input must be a finite number >= 0$"),
        ({"m": {"output": "3"}}, r"^prices\.m\.output must be"),
        ({"m": {"cacheRead": float("nan")}}, r"^prices\.m\.cacheRead must be"),
        (
            {"m": {"inputs": 1}},
            r'^prices\.m\.inputs is not a known key \(expected one of "input", '
            r'"cacheRead", "cacheWrite", "output"; did you mean "input"\?\)$',
        ),
        ({"m": 3}, r"^prices\.m must be a mapping"),
        ({"": {}}, r"^prices must be keyed"),
        (
            {"m": {"input": -1}, "n": {"output": -2}},
            r"^prices\.m\.input .*; prices\.n\.output must be a finite number >= 0$",
        ),
    ],
)
def test_a_bad_price_config_names_the_key(config: object, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        PriceTable.from_config(config)  # type: ignore[arg-type]
    assert "nan" not in str(caught.value)


def test_model_price_refuses_a_negative_price() -> None:
    with pytest.raises(ValueError, match=r"^output must be a finite number >= 0$"):
        ModelPrice(output=-0.5)
    with pytest.raises(PluginConfigError) as caught:
        ModelPrice(cache_read=float("inf"))
    assert caught.value.key == "cacheRead"  # the config key, as data


def test_every_bad_key_of_a_price_table_is_reported_as_data() -> None:
    config = {"a": {"input": -1}, "b": {"ouptut": 2}, "c": {"cacheWrite": "x"}}
    with pytest.raises(PriceConfigError) as caught:
        PriceTable.from_config(config, path="costs")
    assert sorted(key for key, _ in caught.value.problems) == [
        "costs.a.input",
        "costs.b.ouptut",
        "costs.c.cacheWrite",
    ]


def test_cost_middleware_prices_every_attempt(
    runtime: LlmRuntime, server: LoopbackServer
) -> None:
    costs: list[CallCost] = []
    runtime.use(
        retrying({"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 2}})
    )
    runtime.use(cost_middleware(TABLE, costs.append))
    server.enqueue(status(503), answer())

    list(runtime.stream(options()))

    failed, succeeded = costs
    assert failed.cost is None  # no usage reported: unknown, not 0
    assert failed.call.error_code == "SERVER"
    # 6 uncached input, 4 cache read, 6 output at the local/model-a prices.
    assert succeeded.cost is not None
    assert succeeded.cost.total == pytest.approx((6 * 1.0 + 4 * 0.25 + 6 * 4.0) / 1e6)
    assert succeeded.call.attempt == 2


def test_a_price_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "prices.yml"
    path.write_text(
        "currency: CNY\nprices:\n  model-a: {input: 2, output: 8}\n", encoding="utf-8"
    )

    table = PriceTable.from_file(path)

    cost = table.cost(_usage(), "model-a")
    assert cost is not None
    assert format_cost(cost, digits=2) == "6.00 CNY"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("prices: {m: {output: -1}}", r"^prices\.m\.output must be"),
        ("price: {}", r'^price is not a known key \(expected one of "currency", '),
        ("[1, 2]", "must hold a mapping"),
        ("currency: ''\nprices: {}", "^currency must be"),
        ("prices: {m: [unclosed", r"^cannot read price file .*: \w+Error$"),
    ],
)
def test_a_bad_price_file_says_what_is_wrong(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "prices.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        PriceTable.from_file(path)


def test_cost_of_prices_an_assembled_call_by_its_source() -> None:
    chunks: list[StreamChunk] = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="hi"),
        BlockEnd(index=0, block=TextBlock(text="hi")),
        UsageChunk(usage=_usage()),
        Finish(reason=FinishReason.STOP),
    ]
    sourced = collect(chunks, source=ModelSource(provider="local", model="model-a"))
    unsourced = collect(chunks)

    cost = TABLE.cost_of(sourced)

    assert cost is not None
    assert cost.total == 1.0 + 2.0  # the local/model-a prices
    assert TABLE.cost_of(unsourced) is None
