"""Cost from a user-supplied price table: ``PriceTable``, ``Cost``, ``cost_middleware``.

Contracts callers may rely on:

- Prices are the user's, per million tokens, per model: ``input`` (uncached
  input), ``cacheRead``, ``cacheWrite`` and ``output`` (reasoning is billed as
  output: it is inside ``output_tokens``). The library ships no price and never
  guesses one.
- ``PriceTable.cost(usage, model, provider=None)`` is ``None`` when the model
  has no price, when the input or output count is not reported, or when a
  count that is reported and above 0 has no price (a cache read without a
  ``cacheRead`` price is not billed at the input price). A cache count that
  is not reported adds nothing: the provider did not split the input, so
  ``input_tokens`` holds all of it.
- A price is looked up as ``"<provider>/<model>"`` first, then ``"<model>"``.
- ``PriceTable.from_config`` reads the camelCase mapping a YAML file holds
  (``from_file`` reads the file) through the one config mechanism
  (``dsh_llm.config``), and raises ``PriceConfigError`` (a ``ValueError``)
  naming each bad key path as data (a negative, non-finite or non-number
  price, an unknown key); values are not echoed.
- ``PriceTable.cost_of(result)`` prices what ``collect`` or ``call_with_retry``
  returned, by the provider and model of its message's ``ModelSource``.
- ``cost_middleware(table, on_cost)`` reports one ``CallCost`` per call when
  its stream ends; ``format_cost`` renders a cost for summaries.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Protocol

import attrs
import yaml

from dsh_llm.config import ConfigError
from dsh_llm.config import field_error
from dsh_llm.config import join_key
from dsh_llm.config import structure_config
from dsh_llm.observe.watch import CallRecord
from dsh_llm.observe.watch import watch_stream
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.routing import current_attempt
from dsh_llm.runtime import StreamMiddleware
from dsh_llm.runtime import StreamNext

__all__ = [
    "Assembled",
    "CallCost",
    "Cost",
    "ModelPrice",
    "PriceConfigError",
    "PriceTable",
    "cost_middleware",
    "format_cost",
]

PER_TOKENS: Final = 1_000_000
"""Prices are per this many tokens."""


class PriceConfigError(ConfigError):
    """A price table cannot be read: ``problems`` lists each ``(key path, what is
    wrong)`` as data (``prices.gpt-4o.cacheRead``); the message is
    ``<key path> <what is wrong>`` for each, joined by ``"; "``."""

    def _render(self) -> str:
        return "; ".join(
            f"{key} {detail}" if key else detail for key, detail in self.problems
        )


def _price(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value < 0
    ):
        raise field_error(inst, attribute.name, "must be a finite number >= 0")


@attrs.frozen(kw_only=True)
class ModelPrice:
    """One model's prices per million tokens; ``None`` where there is none.

    A bad price raises a ``dsh_llm.config.PluginConfigError`` (a ``ValueError``)
    keyed by its config key (``cacheRead``)."""

    input: float | None = attrs.field(default=None, validator=_price)
    """Uncached input."""
    cache_read: float | None = attrs.field(default=None, validator=_price)
    """Input served from the provider's cache."""
    cache_write: float | None = attrs.field(default=None, validator=_price)
    """Input written to the provider's cache."""
    output: float | None = attrs.field(default=None, validator=_price)
    """Output, reasoning included."""


@attrs.frozen(kw_only=True)
class Cost:
    """What one usage cost, in the table's currency, split as it was billed."""

    total: float
    """The sum of the parts."""
    input: float
    """Uncached input."""
    cache_read: float
    """Cache reads (0 when none were reported)."""
    cache_write: float
    """Cache writes (0 when none were reported)."""
    output: float
    """Output."""
    currency: str
    """The table's currency label."""


def _part(tokens: int | None, price: float | None) -> float | None:
    """The cost of ``tokens``; ``None`` for a billed count without a price."""
    if tokens is None or tokens == 0:
        return 0.0
    if price is None:
        return None
    return tokens * price / PER_TOKENS


def _detached(value: Mapping[str, ModelPrice]) -> Mapping[str, ModelPrice]:
    prices = dict(value)
    for model, price in prices.items():
        if not isinstance(model, str) or not isinstance(price, ModelPrice):
            raise TypeError("prices must map model names to ModelPrice values")
    return prices


@attrs.frozen
class PriceTable:
    """Prices by model (``"model"`` or ``"provider/model"``), in one currency."""

    prices: Mapping[str, ModelPrice] = attrs.field(converter=_detached, hash=False)
    """The entries."""
    currency: str = "USD"
    """A label for the amounts (nothing is converted)."""

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, currency: str = "USD", path: str = "prices"
    ) -> PriceTable:
        """Read ``{model: {input?, cacheRead?, cacheWrite?, output?}}``.

        Raises:
            PriceConfigError: naming ``path.<model>.<key>`` for an unknown key or
                a bad price, and ``path`` when ``config`` is not such a mapping.
        """
        if not isinstance(config, Mapping):
            raise PriceConfigError([(path, "must be a mapping of models to prices")])
        file = _read({"prices": config}, path)
        return cls(file.prices, currency)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> PriceTable:
        """Read a YAML (or JSON) file ``{currency?: "USD", prices: {model: {...}}}``.

        Raises:
            PriceConfigError: naming the key path for a bad entry, or saying the
                file cannot be read or parsed (never quoting its text).
        """
        try:
            with open(path, encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
            where = os.fspath(path)
            raise PriceConfigError(
                [
                    (
                        "",
                        f'cannot read price file "{where}": {type(exc).__name__}',
                    )
                ]
            ) from exc
        if not isinstance(data, Mapping):
            raise PriceConfigError(
                [("", "a price file must hold a mapping with prices")]
            )
        file = _read(data, "prices")
        return cls(file.prices, file.currency)

    def price(self, model: str, provider: str | None = None) -> ModelPrice | None:
        """The price of ``model`` (``"provider/model"`` first), ``None`` when
        unknown."""
        if provider is not None:
            found = self.prices.get(f"{provider}/{model}")
            if found is not None:
                return found
        return self.prices.get(model)

    def cost(
        self, usage: TokenUsage | None, model: str, provider: str | None = None
    ) -> Cost | None:
        """What ``usage`` cost for ``model``; ``None`` when it cannot be known
        (see the module docstring), never a guess."""
        price = self.price(model, provider)
        if price is None or usage is None:
            return None
        if usage.input_tokens is None or usage.output_tokens is None:
            return None
        parts = (
            _part(usage.input_tokens, price.input),
            _part(usage.cache_read_tokens, price.cache_read),
            _part(usage.cache_write_tokens, price.cache_write),
            _part(usage.output_tokens, price.output),
        )
        known = [part for part in parts if part is not None]
        if len(known) != len(parts):
            return None
        input_cost, read_cost, write_cost, output_cost = known
        return Cost(
            total=input_cost + read_cost + write_cost + output_cost,
            input=input_cost,
            cache_read=read_cost,
            cache_write=write_cost,
            output=output_cost,
            currency=self.currency,
        )

    def cost_of(self, result: Assembled) -> Cost | None:
        """The cost of an assembled call (``collect(...)``, ``call_with_retry``):
        its usage priced for the provider and model of its message's
        ``ModelSource``; ``None`` when the message has another source (``collect``
        without ``source=``) or the cost is unknown."""
        source = result.message.source
        if not isinstance(source, ModelSource):
            return None
        return self.cost(result.usage, source.model, source.provider)


def _model_names(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if any(name == "" for name in value):
        raise field_error(
            inst, attribute.name, "must be keyed by non-empty model names"
        )


def _currency(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value == "":
        raise field_error(inst, attribute.name, "must be a non-empty string")


@attrs.frozen(kw_only=True)
class _PriceFile:
    """What a price file holds, read by ``dsh_llm.config.structure_config``."""

    currency: str = attrs.field(default="USD", validator=_currency)
    prices: dict[str, ModelPrice] = attrs.field(factory=dict, validator=_model_names)


def _read(data: Mapping[str, Any], path: str) -> _PriceFile:
    """``data`` as a price file, its ``prices`` key reported as ``path``."""
    try:
        parsed: _PriceFile = structure_config(_PriceFile, data)
    except ConfigError as exc:
        raise PriceConfigError(
            [(_under(path, key), detail) for key, detail in exc.problems]
        ) from None
    return parsed


def _under(path: str, key: str) -> str:
    """A key path with its leading ``prices`` spelt as ``path``."""
    if key == "prices" or key.startswith(("prices.", "prices[")):
        return join_key(path, key[len("prices") :].lstrip("."))
    return key


class Assembled(Protocol):
    """What ``PriceTable.cost_of`` reads: ``dsh_llm.collect``'s
    ``AssembledResponse`` (also what ``call_with_retry`` returns) fits."""

    @property
    def message(self) -> Message:
        """The assistant message; its ``ModelSource`` names provider and model."""
        ...

    @property
    def usage(self) -> TokenUsage | None:
        """The call's usage."""
        ...


def format_cost(cost: Cost | None, digits: int = 6) -> str | None:
    """``"0.000123 USD"``, or ``None`` when the cost is unknown (say nothing
    then: never print a guessed or zero cost for an unknown price)."""
    if cost is None:
        return None
    return f"{cost.total:.{digits}f} {cost.currency}"


@attrs.frozen(kw_only=True)
class CallCost:
    """What ``cost_middleware`` reports for one call."""

    call: CallRecord
    """The call's facts (route, model, usage, finish...)."""
    cost: Cost | None
    """Its cost, ``None`` when unknown (no price, or usage not reported)."""


def cost_middleware(
    table: PriceTable, on_cost: Callable[[CallCost], object]
) -> StreamMiddleware:
    """Middleware telling ``on_cost`` each call's cost when its stream ends.

    Placed after ``dsh_llm.routing``'s middleware (inner), it prices every
    attempt, failed ones included, with the model each attempt really used.
    """

    def middleware(
        options: GenerateOptions, next_: StreamNext
    ) -> Iterable[StreamChunk]:
        def done(record: CallRecord) -> None:
            cost = table.cost(record.usage, record.model, record.provider)
            on_cost(CallCost(call=record, cost=cost))

        return watch_stream(options, next_(), done, attempt=current_attempt())

    return middleware
