"""dsh_llm.runtime.registry: the registration handle and what registering checks and
captures (the runtime's route table is tested in test_runtime.py)."""

from __future__ import annotations

import logging
import types
from typing import Any

import pytest

from dsh_llm import runtime as runtime_module
from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.retry import DEFAULT_RETRY_POLICY
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.runtime import LlmRuntime
from dsh_llm.runtime.registry import AdapterRegistration
from dsh_llm.runtime.registry import Registry
from dsh_llm.runtime.registry import Route
from dsh_llm.runtime.registry import describe_routes
from dsh_llm.runtime.registry import route_names
from tests.runtime_adapters import Quiet
from tests.runtime_adapters import ScriptedAdapter


def test_the_runtime_module_re_exports_the_handle() -> None:
    assert runtime_module.AdapterRegistration is AdapterRegistration
    assert "AdapterRegistration" in runtime_module.__all__


def test_route_names_take_a_list_or_tuple_of_distinct_names() -> None:
    assert route_names(["a", "b"]) == ("a", "b")
    assert route_names(()) == ()
    for bad, code in (
        ("a", ErrorCode.INVALID_ADAPTER),
        ({"a"}, ErrorCode.INVALID_ADAPTER),
        (["a", ""], ErrorCode.INVALID_ADAPTER),
        (["a", "a"], ErrorCode.DUPLICATE_ADAPTER),
    ):
        with pytest.raises(LlmError) as caught:
            route_names(bad)
        assert caught.value.code == code


def test_describe_routes_captures_checked_copies_of_the_adapter_metadata() -> None:
    class Named(Quiet):
        def provider_info(self, provider: str) -> Any:
            return LlmProviderInfo(id=provider, name=f"Named {provider}")

    adapter = Named()
    registration = AdapterRegistration(Registry(), adapter)
    (route,) = describe_routes(registration, ("r",))
    assert route == Route(
        registration=registration,
        adapter=adapter,
        info=LlmProviderInfo(id="r", name="Named r"),
        retry_policy=DEFAULT_RETRY_POLICY,
    )
    # Describing registers nothing: that is the runtime's commit.
    assert registration.providers == ()


# --- registering, replacing, disposing -------------------------------------------


def test_provider_retry_policy_is_captured_per_route_with_defaults() -> None:
    configured = resolve_retry_policy({"mode": "always"}, "test retryPolicy")

    class PolicyAdapter(ScriptedAdapter):
        def provider_retry_policy(self, provider: str) -> Any:
            return configured if provider == "configured" else None

    runtime = LlmRuntime()
    runtime.register_adapter(["configured", "defaulted"], PolicyAdapter())
    assert runtime.provider_retry_policy("configured") is configured
    assert runtime.provider_retry_policy("defaulted") is DEFAULT_RETRY_POLICY
    with pytest.raises(LlmError) as caught:
        runtime.provider_retry_policy("missing")
    assert caught.value.code == ErrorCode.NO_ADAPTER


def test_a_retry_policy_that_is_not_a_resolved_policy_is_refused() -> None:
    class BadPolicy(ScriptedAdapter):
        def provider_retry_policy(self, provider: str) -> Any:
            return {"mode": "always"}

    runtime = LlmRuntime()
    with pytest.raises(LlmError) as caught:
        runtime.register_adapter(["route"], BadPolicy())
    assert caught.value.code == ErrorCode.INVALID_ADAPTER
    assert runtime.list_providers() == ()


def test_dispose_removes_the_routes_and_is_idempotent() -> None:
    runtime = LlmRuntime()
    handle = runtime.register_adapter(["m1"], ScriptedAdapter())
    assert runtime.list_providers() == (LlmProviderInfo(id="m1", name="m1"),)
    assert list(handle.providers) == ["m1"]
    handle()
    handle.dispose()
    assert handle.disposed
    assert not handle.providers
    assert runtime.list_providers() == ()


def test_a_route_listed_twice_is_refused_as_already_registered() -> None:
    runtime = LlmRuntime()
    with pytest.raises(LlmError) as caught:
        runtime.register_adapter(["first", "first"], ScriptedAdapter())
    assert caught.value.code == ErrorCode.DUPLICATE_ADAPTER
    assert "already registered" in caught.value.message
    assert runtime.list_providers() == ()


def test_duplicate_registration_is_refused_with_duplicate_adapter() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["m1"], ScriptedAdapter())
    with pytest.raises(LlmError) as caught:
        runtime.register_adapter(["m2", "m1"], ScriptedAdapter())
    assert caught.value.code == ErrorCode.DUPLICATE_ADAPTER
    assert "already registered" in caught.value.message
    assert [p.id for p in runtime.list_providers()] == ["m1"]


@pytest.mark.parametrize(
    ("providers", "code"),
    [
        ([], ErrorCode.INVALID_ADAPTER),
        ([""], ErrorCode.INVALID_ADAPTER),
        (["ok", ""], ErrorCode.INVALID_ADAPTER),
        (["first", "first"], ErrorCode.DUPLICATE_ADAPTER),
        ("route", ErrorCode.INVALID_ADAPTER),
        ([1], ErrorCode.INVALID_ADAPTER),
    ],
)
def test_bad_route_lists_register_nothing(providers: Any, code: ErrorCode) -> None:
    runtime = LlmRuntime()
    with pytest.raises(LlmError) as caught:
        runtime.register_adapter(providers, ScriptedAdapter())
    assert caught.value.code == code
    assert runtime.list_providers() == ()


def test_registering_something_that_is_not_an_adapter_is_refused() -> None:
    with pytest.raises(LlmError) as caught:
        LlmRuntime().register_adapter(["route"], object())  # type: ignore[arg-type]
    assert caught.value.code == ErrorCode.INVALID_ADAPTER


def test_a_route_can_be_registered_again_after_dispose() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["m1"], ScriptedAdapter()).dispose()
    again = runtime.register_adapter(["m1"], ScriptedAdapter())
    assert [p.id for p in runtime.list_providers()] == ["m1"]
    again()
    assert runtime.list_providers() == ()


def test_replace_after_dispose_raises_registration_disposed() -> None:
    runtime = LlmRuntime()
    handle = runtime.register_adapter(["m1"], ScriptedAdapter())
    handle()
    with pytest.raises(LlmError, match="disposed adapter registration cannot "):
        handle.replace(["leaked"])
    with pytest.raises(LlmError) as caught:
        handle.replace(["leaked"])
    assert caught.value.code == ErrorCode.REGISTRATION_DISPOSED
    assert runtime.list_providers() == ()


def test_replace_with_nothing_keeps_the_registration_alive() -> None:
    runtime = LlmRuntime()
    handle = runtime.register_adapter(["m1"], ScriptedAdapter())
    handle.replace([])
    assert runtime.list_providers() == ()
    handle.replace(["m2"])
    assert runtime.list_providers() == (LlmProviderInfo(id="m2", name="m2"),)
    handle()
    assert runtime.list_providers() == ()


def test_replace_counts_own_routes_as_free_and_keeps_them_on_conflict() -> None:
    runtime = LlmRuntime()
    adapter = ScriptedAdapter()
    handle = runtime.register_adapter(["a", "b"], adapter)
    runtime.register_adapter(["elsewhere"], ScriptedAdapter())
    with pytest.raises(LlmError) as caught:
        handle.replace(["b", "elsewhere"])
    assert caught.value.code == ErrorCode.DUPLICATE_ADAPTER
    assert [p.id for p in runtime.list_providers()] == ["a", "b", "elsewhere"]
    handle.replace(["b", "c"])
    assert [p.id for p in runtime.list_providers()] == ["elsewhere", "b", "c"]
    list(runtime.stream(GenerateOptions(provider="c", model="model", messages=())))
    assert adapter.last.provider == "c"


@pytest.mark.parametrize(
    "info",
    [
        LlmProviderInfo(id="other", name="Name"),
        LlmProviderInfo(id="route", name=""),
        types.SimpleNamespace(id="route", name=1),
        "route",
    ],
    ids=["mismatched-id", "empty-name", "non-str-name", "not-provider-info"],
)
def test_bad_provider_metadata_is_refused_atomically(info: Any) -> None:
    class BadInfo(ScriptedAdapter):
        def provider_info(self, provider: str) -> Any:
            return info if provider == "route" else super().provider_info(provider)

    runtime = LlmRuntime()
    with pytest.raises(LlmError) as caught:
        runtime.register_adapter(["fine", "route"], BadInfo())
    assert caught.value.code == ErrorCode.INVALID_ADAPTER
    assert runtime.list_providers() == ()


def test_provider_metadata_that_raises_is_reported_as_invalid_adapter() -> None:
    class Raising(ScriptedAdapter):
        def provider_info(self, provider: str) -> Any:
            raise RuntimeError("boom")

    with pytest.raises(LlmError) as caught:
        LlmRuntime().register_adapter(["route"], Raising())
    assert caught.value.code == ErrorCode.INVALID_ADAPTER
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_a_library_error_from_provider_metadata_propagates_unchanged() -> None:
    refusal = LlmError("no key configured", ErrorCode.MISSING_CREDENTIAL)

    class Refusing(ScriptedAdapter):
        def provider_info(self, provider: str) -> Any:
            raise refusal

    runtime = LlmRuntime()
    with pytest.raises(LlmError) as caught:
        runtime.register_adapter(["route"], Refusing())
    assert caught.value is refusal
    assert runtime.list_providers() == ()


# --- adapters-updated -------------------------------------------------------------


def test_adapters_updated_fires_after_each_commit_with_registry_readable() -> None:
    runtime = LlmRuntime()
    observed: list[list[str]] = []
    runtime.on_adapters_updated(
        lambda: observed.append([p.id for p in runtime.list_providers()])
    )
    dispose = runtime.register_adapter(["a", "b"], ScriptedAdapter())
    assert observed == [["a", "b"]]
    dispose()
    dispose()
    assert observed == [["a", "b"], []]


def test_a_throwing_listener_is_logged_and_later_listeners_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime = LlmRuntime()
    later: list[int] = []

    def broken() -> None:
        raise RuntimeError("broken observer")

    runtime.on_adapters_updated(broken)
    runtime.on_adapters_updated(lambda: later.append(1))
    with caplog.at_level(logging.WARNING, logger="dsh_llm"):
        runtime.register_adapter(["a"], ScriptedAdapter())
    assert [p.id for p in runtime.list_providers()] == ["a"]
    assert later == [1]
    assert "llm: an llm/adapters-updated listener failed" in caplog.text
    assert "broken observer" in caplog.text


def test_a_listener_returning_a_coroutine_has_it_closed_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[int] = []

    async def observer() -> None:
        ran.append(1)

    runtime = LlmRuntime()
    runtime.on_adapters_updated(observer)
    with caplog.at_level(logging.WARNING, logger="dsh_llm"):
        runtime.register_adapter(["a"], ScriptedAdapter())
    assert ran == []
    assert "coroutine" in caplog.text


def test_replace_emits_once_without_an_empty_intermediate_state() -> None:
    runtime = LlmRuntime()
    registration = runtime.register_adapter(["a"], ScriptedAdapter())
    observed: list[list[str]] = []
    remove = runtime.on_adapters_updated(
        lambda: observed.append([p.id for p in runtime.list_providers()])
    )
    registration.replace(["a"])
    assert observed == [["a"]]
    remove()
    registration.replace(["b"])
    assert observed == [["a"]]


def test_an_invariant_listener_failure_is_raised_after_the_rest_ran() -> None:
    runtime = LlmRuntime()
    later: list[int] = []

    def incoherent() -> None:
        raise LlmError("registry incoherent", "INVARIANT")

    runtime.on_adapters_updated(incoherent)
    runtime.on_adapters_updated(lambda: later.append(1))
    with pytest.raises(LlmError, match="registry incoherent"):
        runtime.register_adapter(["a"], ScriptedAdapter())
    # Told of the registration, then of its undo: no route is left that no
    # handle could dispose, and the route can be registered again.
    assert later == [1, 1]
    assert runtime.list_providers() == ()


def test_a_route_undone_by_an_invariant_listener_can_be_registered_again() -> None:
    runtime = LlmRuntime()
    calls: list[int] = []

    def incoherent_once() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise LlmError("registry incoherent", "INVARIANT")

    runtime.on_adapters_updated(incoherent_once)
    with pytest.raises(LlmError, match="registry incoherent"):
        runtime.register_adapter(["a"], ScriptedAdapter())
    registration = runtime.register_adapter(["a"], ScriptedAdapter())
    assert [p.id for p in runtime.list_providers()] == ["a"]
    registration.dispose()
    assert runtime.list_providers() == ()


def test_a_listener_failure_whose_code_cannot_be_read_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Hostile(Exception):
        @property
        def code(self) -> str:
            raise RuntimeError("no code here")

    def observer() -> None:
        raise Hostile("hostile observer")

    runtime = LlmRuntime()
    runtime.on_adapters_updated(observer)
    with caplog.at_level(logging.WARNING, logger="dsh_llm"):
        runtime.register_adapter(["a"], ScriptedAdapter())
    assert [p.id for p in runtime.list_providers()] == ["a"]
    assert "hostile observer" in caplog.text
