"""The route table: which registration serves which route, and the handles.

``Registry`` owns the table; ``LlmRuntime`` holds one and reads it. Contracts
callers may rely on:

- ``Registry.register`` is all-or-nothing: the routes (``route_names``) and the
  adapter's metadata (``describe_routes``) are checked before anything changes
  (``INVALID_ADAPTER``, ``DUPLICATE_ADAPTER``). Its public ``on_commit`` hook
  runs inside the commit, so a caller (a plugin scope) tracks the handle before
  any other thread can see the routes.
- ``AdapterRegistration`` is the handle: callable and ``dispose()`` release its
  routes (idempotent), ``replace(providers)`` swaps them in one commit
  (``REGISTRATION_DISPOSED`` after disposal).
- Commits are serialised by one lock and publish a new table in one assignment
  (copy on write): a reader of ``routes`` sees the table before or after a
  change, never half of one. ``on_adapters_updated`` listeners run after each
  commit, outside the lock.
- ``Route`` values hold detached copies: the display facts and the retry policy
  (the normal defaults for ``None``) are captured once, at registration.
- A ``HarnessError`` the adapter raises while described propagates unchanged.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Final

import attrs

from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import HarnessError
from dsh_llm.errors import LlmError
from dsh_llm.retry import DEFAULT_RETRY_POLICY
from dsh_llm.retry import AlwaysRetryPolicy
from dsh_llm.retry import NormalRetryPolicy
from dsh_llm.retry import RetryPolicy

__all__ = [
    "AdapterRegistration",
    "Registry",
    "Route",
    "describe_routes",
    "find_route",
    "route_names",
]

_log = logging.getLogger("dsh_llm")

_LISTENER_FAILED: Final = "llm: an llm/adapters-updated listener failed"


class AdapterRegistration:
    """The handle ``LlmRuntime.register_adapter`` returns.

    Calling it, or ``dispose()``, releases every route it holds (idempotent).
    ``replace(providers)`` swaps its route set for another in one step.
    """

    __slots__ = ("_adapter", "_disposed", "_providers", "_registry")

    def __init__(self, registry: Registry, adapter: LlmAdapter) -> None:
        self._registry = registry
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
        self._registry._dispose(self)

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
        self._registry._replace(self, providers)

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


class Registry:
    """The route table and its listeners. Safe to share between threads."""

    __slots__ = ("_listeners", "_lock", "_routes")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # Published by assignment only (copy on write): readers take the current
        # dict without locking and never observe a commit half-way.
        self._routes: Mapping[str, Route] = {}
        self._listeners: tuple[tuple[object, Callable[[], object]], ...] = ()

    @property
    def routes(self) -> Mapping[str, Route]:
        """The current table, route name to ``Route``, in registration order.

        A snapshot: later commits publish a new mapping and leave this one as
        it is. Callers must not mutate it.
        """
        return self._routes

    def register(
        self,
        providers: Sequence[str],
        adapter: LlmAdapter,
        *,
        on_commit: Callable[[AdapterRegistration], object] | None = None,
    ) -> AdapterRegistration:
        """Serve the routes ``providers`` with ``adapter``
        (``LlmRuntime.register_adapter`` documents the checks).

        ``on_commit(handle)`` runs inside the commit, under the lock, before the
        listeners are told; what it raises propagates with the routes already
        committed, so it should not fail.

        Raises:
            LlmError: ``INVALID_ADAPTER``, ``DUPLICATE_ADAPTER``; an
                ``INVARIANT`` from a listener after the registration is undone.
        """
        if not isinstance(adapter, LlmAdapter):
            raise LlmError(
                f"register_adapter() needs an LlmAdapter instance, got "
                f"{type(adapter).__name__}",
                ErrorCode.INVALID_ADAPTER,
            )
        routes = route_names(providers)
        if not routes:
            raise LlmError(
                "an adapter must register at least one provider",
                ErrorCode.INVALID_ADAPTER,
            )
        registration = AdapterRegistration(self, adapter)
        candidates = describe_routes(registration, routes)
        with self._lock:
            self._commit(registration, candidates)
            if on_commit is not None:
                on_commit(registration)
        try:
            self._emit_adapters_updated()
        except Exception:
            # All-or-nothing: the caller gets no handle, so no route may stay
            # behind that nothing could dispose. The second notice's failure
            # would only repeat the first.
            try:
                self._dispose(registration)
            except Exception as exc:
                _log.warning(_LISTENER_FAILED, exc_info=exc)
            raise
        return registration

    def on_adapters_updated(self, listener: Callable[[], object]) -> Callable[[], None]:
        """Call ``listener()`` after every commit (see
        ``LlmRuntime.on_adapters_updated``).

        Returns:
            A function removing the listener (idempotent).
        """
        token = object()
        with self._lock:
            self._listeners = (*self._listeners, (token, listener))

        def remove() -> None:
            with self._lock:
                self._listeners = tuple(
                    entry for entry in self._listeners if entry[0] is not token
                )

        return remove

    def _replace(
        self, registration: AdapterRegistration, providers: Sequence[str]
    ) -> None:
        routes = route_names(providers)
        _check_live(registration)
        candidates = describe_routes(registration, routes)
        with self._lock:
            _check_live(registration)
            self._commit(registration, candidates)
        self._emit_adapters_updated()

    def _commit(
        self, registration: AdapterRegistration, candidates: Sequence[Route]
    ) -> None:
        """Swap ``registration``'s routes for ``candidates``; the caller holds
        the lock. Checks conflicts against the current table first."""
        current = self._routes
        for route in candidates:
            holder = current.get(route.info.id)
            if holder is not None and holder.registration is not registration:
                raise LlmError(
                    f'an adapter for provider "{route.info.id}" is already registered',
                    ErrorCode.DUPLICATE_ADAPTER,
                )
        table = {
            name: route
            for name, route in current.items()
            if route.registration is not registration
        }
        for route in candidates:
            table[route.info.id] = route
        registration._providers = tuple(route.info.id for route in candidates)
        self._routes = table
        _log.info(
            "registered %s for %s",
            type(registration.adapter).__name__,
            _route_list({route.info.id: route for route in candidates}),
        )

    def _dispose(self, registration: AdapterRegistration) -> None:
        with self._lock:
            if registration._disposed:
                return
            registration._disposed = True
            registration._providers = ()
            self._routes = {
                name: route
                for name, route in self._routes.items()
                if route.registration is not registration
            }
        self._emit_adapters_updated()

    def _emit_adapters_updated(self) -> None:
        invariant: BaseException | None = None
        for _, listener in self._listeners:
            try:
                returned = listener()
            except Exception as exc:
                if invariant is None and _code_of(exc) == ErrorCode.INVARIANT:
                    invariant = exc
                    continue
                _log.warning(_LISTENER_FAILED, exc_info=exc)
                continue
            if inspect.iscoroutine(returned):
                returned.close()
                _log.warning(
                    "%s: it returned a coroutine, which was closed unawaited "
                    "(listeners must be synchronous)",
                    _LISTENER_FAILED,
                )
        if invariant is not None:
            raise invariant

    def __repr__(self) -> str:
        return f"<Registry providers={list(self._routes)}>"


def find_route(routes: Mapping[str, Route], provider: str) -> Route:
    """The route serving ``provider`` in ``routes`` (a ``Registry.routes``
    snapshot).

    Raises:
        LlmError: ``NO_ADAPTER`` when no adapter serves ``provider`` there.
    """
    route = routes.get(provider)
    if route is None:
        raise LlmError(
            f'no adapter registered for provider "{provider}" '
            f"(registered: {_route_list(routes)})",
            ErrorCode.NO_ADAPTER,
        )
    return route


def _route_list(routes: Mapping[str, Route]) -> str:
    """``"a", "b"`` (sorted), or ``none`` for an empty table."""
    return ", ".join(f'"{name}"' for name in sorted(routes)) or "none"


def _check_live(registration: AdapterRegistration) -> None:
    if registration._disposed:
        raise LlmError(
            "a disposed adapter registration cannot replace its routes",
            ErrorCode.REGISTRATION_DISPOSED,
        )


def _code_of(exc: BaseException) -> object:
    try:
        return getattr(exc, "code", None)
    except Exception:
        return None


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
