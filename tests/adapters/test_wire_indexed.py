"""What the two numbered-block translators share: ``adapters._wire.indexed``
(the block index checks, string fields) and the writer's ``stopped_failure``
(the failure of an unsuccessful stop reason), through both wires' translators."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_llm.adapters._wire.indexed import IndexedTranslator
from dsh_llm.adapters._wire.writer import stopped_failure
from dsh_llm.adapters.anthropic.translate import MessagesTranslator
from dsh_llm.adapters.bedrock.translate import ConverseStreamTranslator
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.sse import SseEvent


def _translators() -> list[IndexedTranslator[Any]]:
    return [MessagesTranslator(), ConverseStreamTranslator()]


@pytest.mark.parametrize("translator", _translators())
@pytest.mark.parametrize("index", [-1, "0", 1.0, None, True])
def test_an_index_that_is_not_an_int_at_least_zero_is_malformed(
    translator: IndexedTranslator[Any], index: object
) -> None:
    with pytest.raises(LlmError) as caught:
        translator.slot({translator.index_field: index})
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert f"a {translator.index_name} that is not an integer >= 0" in str(caught.value)


@pytest.mark.parametrize("translator", _translators())
def test_a_slot_names_what_stands_at_its_index(
    translator: IndexedTranslator[Any],
) -> None:
    marker = object()
    translator.blocks[2] = marker
    assert translator.slot({translator.index_field: 2}) == (2, marker)
    assert translator.slot({translator.index_field: 3}) == (3, None)
    with pytest.raises(LlmError, match="a delta for block 3, which never started"):
        translator.slot({translator.index_field: 3}, "delta")


@pytest.mark.parametrize("translator", _translators())
def test_a_second_start_at_one_index_is_malformed(
    translator: IndexedTranslator[Any],
) -> None:
    assert translator.new_index({translator.index_field: 0}) == 0
    translator.blocks[0] = object()
    with pytest.raises(LlmError) as caught:
        translator.new_index({translator.index_field: 0})
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert f"a {translator.start_event} for block 0, which already began" in str(
        caught.value
    )


@pytest.mark.parametrize("translator", _translators())
def test_a_string_field_is_empty_when_absent_and_malformed_when_not_a_string(
    translator: IndexedTranslator[Any],
) -> None:
    assert translator.string({"text": "hi"}, "text") == "hi"
    assert translator.string({"text": None}, "text") == ""
    assert translator.string({}, "text") == ""
    with pytest.raises(LlmError, match="a text that is not a string"):
        translator.string({"text": 3}, "text")


def test_a_stop_of_a_block_that_never_started_is_malformed() -> None:
    translator = MessagesTranslator()
    event = {"type": "content_block_stop", "index": 4}
    with pytest.raises(LlmError, match="block 4, which never started") as caught:
        translator.feed(SseEvent(event="content_block_stop", data=json.dumps(event)))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        ("refusal", "REFUSAL"),
        ("some.reason-2", "SOME.REASON-2"),
        ("not an identifier!", ErrorCode.UNKNOWN_FINISH_REASON.value),
        ("x" * 65, ErrorCode.UNKNOWN_FINISH_REASON.value),
        ("", ErrorCode.UNKNOWN_FINISH_REASON.value),
    ],
)
def test_an_unsuccessful_stop_reason_is_upper_cased_only_when_an_identifier(
    reason: str, code: str
) -> None:
    assert stopped_failure(reason).code == code


def test_a_stop_failure_shows_the_reason_cut_and_takes_a_given_code() -> None:
    failure = stopped_failure("r" * 200, code="CONTENT_FILTER")
    assert failure.code == "CONTENT_FILTER"
    assert failure.message == "model stopped: " + "r" * 120
