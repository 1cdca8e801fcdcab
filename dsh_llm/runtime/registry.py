"""Registering an adapter: the handle a registration returns, and what it captures.

``LlmRuntime.register_adapter`` owns the route table; this module owns one
registration's side of it. Contracts callers may rely on:

- ``AdapterRegistration`` is the handle: callable and ``dispose()`` release its
  routes (idempotent), ``replace(providers)`` swaps them in one commit. The
  table itself, and the lock that serialises commits, are the runtime's.
- ``route_names(providers)`` accepts a list or tuple of distinct non-empty route
  names (``INVALID_ADAPTER``, ``DUPLICATE_ADAPTER`` for one listed twice).
- ``describe_routes(registration, names)`` asks the adapter for each route's
  ``provider_info`` and ``provider_retry_policy`` and checks the answers
  (``INVALID_ADAPTER``; a ``HarnessError`` the adapter raises propagates
  unchanged). The resulting ``Route`` values hold detached copies: the display
  facts and the retry policy (the normal defaults for ``None``) are captured
  once, at registration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from dsh_llm.adapter import LlmAdapter, LlmProviderInfo
from dsh_llm.errors import ErrorCode, HarnessError, LlmError
from dsh_llm.retry import (
    DEFAULT_RETRY_POLICY,
    AlwaysRetryPolicy,
    NormalRetryPolicy,
    RetryPolicy,
)

if TYPE_CHECKING:
    # The runtime imports this module; the handle only calls back into it.
    from dsh_llm.runtime import LlmRuntime

__all__ = ["AdapterRegistration", "Route", "describe_routes", "route_names"]


class AdapterRegistration:
    """The handle ``LlmRuntime.register_adapter`` returns.

    Calling it, or ``dispose()``, releases every route it holds (idempotent).
    ``replace(providers)`` swaps its route set for another in one step.
    """

    __slots__ = ("_adapter", "_disposed", "_providers", "_runtime")

    def __init__(self, runtime: LlmRuntime, adapter: LlmAdapter) -> None:
        self._runtime = runtime
        self._adapter = adapter
        self._providers: tuple[str, ...] = ()
        self._disposed = False

    @property
    def adapter(self) -> LlmAdapter:
        """The registered adapter instance."""
        return self._adapter

    @property
    def providers(self) -> tuple[str, ...]:
        """The routes this registration holds now, in registration order."""
        return self._providers

    @property
    def disposed(self) -> bool:
        """Whether ``dispose()`` has run."""
        return self._disposed

    def __call__(self) -> None:
        """Same as ``dispose()``."""
        self.dispose()

    def dispose(self) -> None:
        """Release every route this registration holds. Calling it again does
        nothing."""
        self._runtime._dispose(self)

    def replace(self, providers: Sequence[str]) -> None:
        """Hold exactly ``providers`` from now on, keeping the same adapter.

        The new set is checked in full first (routes this registration holds
        count as free); a refused set leaves the current routes in place. The
        swap is one commit: no reader sees the registry without these routes in
        between. ``[]`` is legal and keeps the registration alive with no route.

        Raises:
            LlmError: ``REGISTRATION_DISPOSED`` after ``dispose()``;
                ``INVALID_ADAPTER`` / ``DUPLICATE_ADAPTER`` as for
                ``register_adapter``.
        """
        self._runtime._replace(self, providers)

    def __repr__(self) -> str:
        state = "disposed" if self._disposed else f"providers={list(self._providers)}"
        return f"<AdapterRegistration {type(self._adapter).__name__} {state}>"


@attrs.frozen(kw_only=True)
class Route:
    """One registered route: who serves it and what was captured then."""

    registration: AdapterRegistration
    """The registration holding the route."""
    adapter: LlmAdapter
    """The adapter serving it."""
    info: LlmProviderInfo
    """Its display facts (``info.id`` is the route)."""
    retry_policy: RetryPolicy
    """The retry policy captured at registration."""


def route_names(providers: object) -> tuple[str, ...]:
    """``providers`` as a tuple of route names, checked.

    Raises:
        LlmError: ``INVALID_ADAPTER`` for something other than a list or tuple
            of non-empty strings; ``DUPLICATE_ADAPTER`` for a name listed twice.
    """
    if isinstance(providers, str) or not isinstance(providers, Sequence):
        raise LlmError(
            f"providers must be a list of route names, got {type(providers).__name__}",
            ErrorCode.INVALID_ADAPTER,
        )
    seen: set[str] = set()
    for name in providers:
        if not isinstance(name, str) or name == "":
            raise LlmError(
                "adapter provider names must be non-empty strings",
                ErrorCode.INVALID_ADAPTER,
            )
        if name in seen:
            raise LlmError(
                f'an adapter for provider "{name}" is already registered '
                "(listed twice)",
                ErrorCode.DUPLICATE_ADAPTER,
            )
        seen.add(name)
    return tuple(providers)


def describe_routes(
    registration: AdapterRegistration, names: tuple[str, ...]
) -> tuple[Route, ...]:
    """Ask the adapter about each route and check its answers (called outside
    the runtime's lock: adapter code may be slow).

    Raises:
        LlmError: ``INVALID_ADAPTER`` for metadata that cannot be read, an info
            whose id differs from its route or whose name is empty, or a retry
            policy that is neither resolved nor ``None``.
        HarnessError: what the adapter raised, unchanged.
    """
    adapter = registration.adapter
    described: list[Route] = []
    for name in names:
        try:
            info = adapter.provider_info(name)
            policy = adapter.provider_retry_policy(name)
        except HarnessError:
            raise
        except Exception as exc:
            raise LlmError(
                f'adapter metadata for provider "{name}" could not be read: {exc}',
                ErrorCode.INVALID_ADAPTER,
                cause=exc,
            ) from exc
        if (
            not isinstance(info, LlmProviderInfo)
            or info.id != name
            or not isinstance(info.name, str)
            or info.name == ""
        ):
            raise LlmError(
                f'adapter metadata for provider "{name}" must preserve its id and '
                "have a non-empty name",
                ErrorCode.INVALID_ADAPTER,
            )
        if policy is None:
            policy = DEFAULT_RETRY_POLICY
        elif not isinstance(policy, NormalRetryPolicy | AlwaysRetryPolicy):
            raise LlmError(
                f'adapter retry policy for provider "{name}" must be a resolved '
                f"retry policy or None, got {type(policy).__name__}",
                ErrorCode.INVALID_ADAPTER,
            )
        described.append(
            Route(
                registration=registration,
                adapter=adapter,
                info=LlmProviderInfo(id=name, name=info.name),
                retry_policy=policy,
            )
        )
    return tuple(described)
