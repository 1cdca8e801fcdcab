"""What the values show a person: ``str(TokenUsage)``, short reprs without ids,
and the Markdown a notebook renders (issue 29, item 3)."""

from __future__ import annotations

import re

import pytest

from dsh_llm import FinishReason
from dsh_llm import GenerateOptions
from dsh_llm import LlmFailure
from dsh_llm import ReasoningBlock
from dsh_llm import ResponseFormat
from dsh_llm import TextBlock
from dsh_llm import TokenUsage
from dsh_llm import ToolCallBlock
from dsh_llm import ToolSchema
from dsh_llm import create_user_message
from dsh_llm.assembler import AssembledResponse
from dsh_llm.observe.cost import ModelPrice
from dsh_llm.observe.cost import PriceTable
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol.display import clip
from dsh_llm.protocol.display import code
from dsh_llm.protocol.display import escaped
from dsh_llm.protocol.display import fenced
from dsh_llm.signal import AbortController
from dsh_llm.tools import ToolLoopResult

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.mark.parametrize(
    ("usage", "text"),
    [
        (
            TokenUsage(
                input_tokens=27,
                output_tokens=69,
                cache_read_tokens=256,
                reasoning_tokens=24,
            ),
            "in 27 / out 69 (cache 256, reasoning 24)",
        ),
        (TokenUsage(input_tokens=27, output_tokens=69), "in 27 / out 69"),
        (
            TokenUsage(input_tokens=1, output_tokens=2, cache_write_tokens=0),
            "in 1 / out 2 (cache write 0)",
        ),
        (
            TokenUsage(
                input_tokens=5,
                output_tokens=6,
                cache_read_tokens=7,
                cache_write_tokens=8,
                reasoning_tokens=9,
            ),
            "in 5 / out 6 (cache 7, cache write 8, reasoning 9)",
        ),
        (TokenUsage(input_tokens=None, output_tokens=69), "in ? / out 69"),
        (TokenUsage(input_tokens=3, output_tokens=None), "in 3 / out ?"),
        (
            TokenUsage(input_tokens=None, output_tokens=None, reasoning_tokens=4),
            "in ? / out ? (reasoning 4)",
        ),
        (TokenUsage.unknown(), "not reported"),
    ],
)
def test_str_of_token_usage_reads_like_a_sentence(usage, text):
    assert str(usage) == text
    assert f"{usage}" == text
    # The repr stays the precise attrs one.
    assert repr(usage).startswith("TokenUsage(input_tokens=")


def _reply(**fields) -> AssembledResponse:
    message = create_assistant_message(
        [
            ReasoningBlock(text="The user wants the weather."),
            TextBlock(text="Checking the *weather* now."),
            ToolCallBlock(
                id="call_1", name="get_weather", arguments='{"city":"Paris"}'
            ),
        ],
        provider="deepseek-official",
        model="deepseek-v4-flash",
    )
    values = {
        "message": message,
        "usage": TokenUsage(input_tokens=27, output_tokens=69, cache_read_tokens=256),
        "finish": FinishReason.TOOL_CALLS,
        **fields,
    }
    return AssembledResponse(**values)


def test_a_reply_repr_is_short_and_has_no_ids():
    reply = _reply()
    shown = repr(reply)
    assert shown == (
        "AssembledResponse(tool-calls, text='Checking the *weather* now.', "
        "reasoning=27 chars, tool_calls=[get_weather], "
        "usage=in 27 / out 69 (cache 256), from deepseek-official/deepseek-v4-flash)"
    )
    assert not UUID.search(shown)
    assert reply.message.id not in repr(reply.message)


def test_a_long_text_is_clipped_in_a_repr():
    reply = _reply(
        message=create_assistant_message("word " * 100, provider="p", model="m")
    )
    assert f"text={clip('word ' * 100)}" in repr(reply)
    assert clip("word " * 100).endswith("'…")
    assert len(repr(reply)) < 200


def test_a_failed_reply_shows_its_code_and_attempts():
    failure = LlmFailure(message="upstream said 500", code="SERVER", status=500)
    reply = AssembledResponse(
        message=create_assistant_message([], provider="p", model="m"),
        usage=None,
        finish=FinishReason.error(failure),
        attempts=3,
        attempt_usages=(None, None, None),
    )
    assert repr(reply) == (
        "AssembledResponse(error SERVER: upstream said 500, usage=not reported, "
        "attempts=3, from p/m)"
    )
    markdown = reply._repr_markdown_()
    assert markdown == (
        "error SERVER: upstream said 500 · not reported · "
        "3 attempts, in all not reported · p/m"
    )


def test_the_rich_display_folds_reasoning_and_shows_tool_arguments():
    markdown = _reply()._repr_markdown_()
    folded = (
        "<details><summary>Reasoning (27 characters)</summary>\n\n"
        "The user wants the weather.\n\n</details>"
    )
    assert markdown.startswith(folded)
    assert "Checking the *weather* now." in markdown  # the model's Markdown
    assert (
        "**Tool call** `get_weather` (`call_1`)\n\n"
        '```json\n{\n  "city": "Paris"\n}\n```'
    ) in markdown
    assert markdown.endswith(
        "\n\n---\n\ntool-calls · in 27 / out 69 (cache 256) · "
        "deepseek-official/deepseek-v4-flash"
    )


def test_the_rich_display_shows_the_cost_when_the_price_is_known():
    prices = PriceTable(
        {"deepseek-v4-flash": ModelPrice(input=1.0, cache_read=0.5, output=2.0)}
    )
    reply = _reply()
    # 27 * 1.0 + 256 * 0.5 + 69 * 2.0 per million tokens
    assert reply.to_markdown(prices=prices).endswith(
        " · deepseek-official/deepseek-v4-flash · cost 0.000293 USD"
    )
    unknown = PriceTable({"another-model": ModelPrice(input=1.0, output=1.0)})
    assert "cost" not in reply.to_markdown(prices=unknown)


def test_arguments_that_are_not_json_are_shown_as_written():
    reply = _reply(
        message=create_assistant_message(
            [ToolCallBlock(id="c", name="f", arguments='{"cut": "``` ')],
            provider="p",
            model="m",
        )
    )
    assert '````\n{"cut": "``` \n````' in reply.to_markdown()


def test_messages_show_role_text_and_source_without_their_id():
    user = create_user_message("Weather in Paris?")
    assert repr(user) == "Message(user, 'Weather in Paris?', from user)"
    result = create_tool_result_message("call_1", "22 C", is_error=True)
    assert (
        repr(result)
        == "Message(user, result (error) for call_1: '22 C', from tool call_1)"
    )
    assert "**Tool result (error)** for `call_1`\n\n```\n22 C\n```" in (
        result._repr_markdown_()
    )
    assert (
        _reply()
        .message._repr_markdown_()
        .startswith("**assistant** (deepseek-official/deepseek-v4-flash)\n\n<details>")
    )


def test_options_repr_is_short_and_never_shows_header_or_body_values():
    controller = AbortController()
    options = GenerateOptions.from_prompt(
        "deepseek-v4-flash",
        "Weather in Paris?",
        provider="deepseek-official",
        system="Be brief.",
        temperature=0,
        tools=[ToolSchema(name="get_weather", description="", parameters={})],
        response_format=ResponseFormat(schema={"type": "object"}, name="City"),
        extra_body={"top_k": "body-secret"},
        extra_headers={"x-key": "header-secret"},
        signal=controller.signal,
    )
    shown = repr(options)
    assert shown == (
        "GenerateOptions(model='deepseek-v4-flash', provider='deepseek-official', "
        "messages=1 message (last: user 'Weather in Paris?'), system='Be brief.', "
        "tools=[get_weather], temperature=0, response_format=City, "
        "extra_body=keys [top_k], extra_headers=[x-key])"
    )
    markdown = options._repr_markdown_()
    for text in (shown, markdown):
        assert "body-secret" not in text
        assert "header-secret" not in text
        assert not UUID.search(text)
    assert "| temperature | 0 |" in markdown
    assert "| tools | \\[get\\_weather\\] |" in markdown
    assert markdown.endswith("1. **user** (user) 'Weather in Paris?'")
    assert "signal" not in shown  # not compared, hashed or shown
    assert repr(GenerateOptions.from_prompt("m", "hi")) == (
        "GenerateOptions(model='m', messages=1 message (last: user 'hi'))"
    )


def test_a_response_format_repr_sums_up_its_schema():
    schema = {"type": "object", "properties": {"a": {}, "b": {}}}
    assert repr(ResponseFormat(schema=schema, name="City", strict=True)) == (
        "ResponseFormat(name='City', strict=True, schema=<object, 2 properties>)"
    )


def test_display_methods_leave_equality_and_hashing_alone():
    first, second = _reply(), _reply()
    assert first != second  # fresh message ids, as before
    same = AssembledResponse(
        message=first.message, usage=first.usage, finish=first.finish
    )
    assert same == first
    assert hash(TokenUsage(input_tokens=1, output_tokens=2)) == hash(
        TokenUsage(input_tokens=1, output_tokens=2)
    )


def _loop_result() -> ToolLoopResult:
    history = create_assistant_message("An earlier answer.", provider="p", model="m")
    call = create_assistant_message(
        [ToolCallBlock(id="c1", name="get_weather", arguments='{"city": "Paris"}')],
        provider="p",
        model="m",
    )
    result = create_tool_result_message("c1", '{"temp": 21}')
    answer = create_assistant_message("21 C in Paris.", provider="p", model="m")
    return ToolLoopResult(
        response=AssembledResponse(
            message=answer,
            usage=TokenUsage(input_tokens=30, output_tokens=5),
            finish=FinishReason.STOP,
        ),
        messages=(
            create_user_message("Hi"),
            history,
            create_user_message("Weather in Paris?"),
            call,
            result,
            answer,
        ),
        steps=2,
        stop_reason="finished",
    )


def test_a_tool_loop_result_shows_its_own_turns_only():
    loop = _loop_result()
    assert repr(loop) == (
        "ToolLoopResult(finished, steps=2, tool_calls=[get_weather], "
        "text='21 C in Paris.', messages=6)"
    )
    assert [m.text for m in loop.loop_messages()] == ["", "", "21 C in Paris."]
    markdown = loop._repr_markdown_()
    assert "An earlier answer." not in markdown
    assert markdown == (
        "**Tool call** `get_weather` (`c1`)\n\n"
        '```json\n{\n  "city": "Paris"\n}\n```\n\n'
        "**Tool result** for `c1`\n\n"
        '```\n{"temp": 21}\n```\n\n'
        "21 C in Paris.\n\n---\n\n"
        "finished after 2 steps · stop · in 30 / out 5 (last step) · p/m"
    )


def test_a_failed_step_shows_after_the_kept_turns():
    loop = _loop_result()
    failed = AssembledResponse(
        message=create_assistant_message("partial", provider="p", model="m"),
        usage=None,
        finish=FinishReason.error(LlmFailure(message="cut", code="STREAM_CLOSED")),
    )
    broken = ToolLoopResult(
        response=failed,
        messages=loop.messages[:5],
        steps=2,
        stop_reason="failed",
    )
    turns = broken.loop_messages()
    assert [m.role for m in turns] == ["assistant", "user", "assistant"]
    assert turns[-1] is failed.message
    assert broken.to_markdown().endswith(
        "failed after 2 steps · error STREAM\\_CLOSED: cut · not reported (last step)"
        " · p/m"
    )


def test_markdown_helpers_quote_what_they_show():
    assert fenced("a ``` b") == "````\na ``` b\n````"
    assert code("a`b") == "``a`b``"
    assert code("`x") == "`` `x ``"
    assert escaped("a_b *c* <d> & [x]") == "a\\_b \\*c\\* \\<d\\> &amp; \\[x\\]"
