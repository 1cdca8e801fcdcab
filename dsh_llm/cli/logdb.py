"""The log database: every ``dsh-llm chat`` call, in SQLite (stdlib ``sqlite3``).

Contracts callers may rely on:

- One row per call (``calls``) in a conversation (``conversations``): the route
  and model, the server's URL for ``--base-url`` (without credentials), the
  prompt, the system prompt, the options, the user message and the answer's
  assistant message (their blocks, the answer's ``ModelSource`` and
  ``ReplayEnvelope``, as ``dsh_llm.serde`` writes them), its text and reasoning,
  usage, finish, when it started, how long it took and how long until its first
  chunk. Never a key: nothing here is given one.
- Several processes may write at once: the database runs in WAL mode with a busy
  timeout (``BUSY_TIMEOUT_S``), and every write is one ``BEGIN IMMEDIATE``
  transaction, so a reader never sees half a call and writers wait their turn.
- The schema has a version (table ``schema_version``) and a list of migrations
  (``MIGRATIONS``, oldest first); opening a database of an older version applies
  the missing ones in one transaction, rows kept. A database of a newer version
  is refused (``LogError``), never changed.
- A database it creates has mode 0600 (it holds every prompt and answer), in
  a directory it creates with mode 0700.
- Every failure (a file that is not a database, a lock held past the timeout, a
  disk error, a row that cannot be read back) raises ``LogError`` naming the
  file; ``sqlite3`` errors never escape.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from datetime import UTC
from datetime import datetime
from pathlib import Path
from typing import Any
from typing import Final

import attrs

from dsh_llm.assembler import AssembledResponse
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import Message
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.serde import camel_key
from dsh_llm.serde import chunk_from_dict
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import message_from_dict
from dsh_llm.serde import message_to_dict as _message_to_dict

LOGS_DB: Final = "logs.db"
"""The database's file name in the user's data directory."""
BUSY_TIMEOUT_S: Final = 5.0
"""How long a write waits for another process's transaction to end."""

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 1: conversations and their calls.
    (
        """CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            started_at TEXT NOT NULL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL
        )""",
        """CREATE TABLE calls (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id),
            started_at TEXT NOT NULL,
            duration_ms REAL,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            prompt TEXT NOT NULL,
            system TEXT,
            options TEXT NOT NULL,
            user_message TEXT NOT NULL,
            response TEXT NOT NULL,
            reasoning TEXT NOT NULL,
            message TEXT NOT NULL,
            usage TEXT,
            finish TEXT NOT NULL,
            finish_kind TEXT NOT NULL,
            input_tokens INTEGER,
            output_tokens INTEGER
        )""",
    ),
    # 2: the time to the first chunk, the --base-url server, and the indexes
    # `logs --cid` and `chat -c` read through.
    (
        "ALTER TABLE calls ADD COLUMN first_chunk_ms REAL",
        "ALTER TABLE calls ADD COLUMN base_url TEXT",
        "CREATE INDEX calls_by_conversation ON calls (conversation_id)",
    ),
)
"""Each version's statements, oldest first; version N is ``MIGRATIONS[N - 1]``."""
SCHEMA_VERSION: Final = len(MIGRATIONS)
"""The version this code writes."""

_FAILED_KINDS: Final = ("error", "aborted")


class LogError(Exception):
    """The log database cannot be opened, read or written; the message names the
    file and the reason."""


def new_id() -> str:
    """A fresh id for a call or a conversation (32 hex digits)."""
    return uuid.uuid4().hex


def utc_now() -> str:
    """Now, as the log writes times: ISO 8601 in UTC, milliseconds, ``Z``."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    return now.replace("+00:00", "Z")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@attrs.frozen(kw_only=True)
class CallRecord:
    """What is written for one call."""

    conversation_id: str
    """The conversation it belongs to (created with its first call)."""
    provider: str
    """The route."""
    model: str
    """The model id."""
    prompt: str
    """The prompt's text."""
    system: str | None
    """The system prompt."""
    options: Mapping[str, Any]
    """The request's other options, as JSON values (``temperature``...)."""
    user_message: Message
    """The user message sent (its images as references)."""
    response: AssembledResponse
    """The answer: its message (with ``ModelSource``), usage and finish."""
    started_at: str
    """When the call started (``utc_now()``)."""
    duration_ms: float
    """How long it took to its finish."""
    first_chunk_ms: float | None = None
    """How long until its first chunk (``None``: none came)."""
    base_url: str | None = None
    """The ``--base-url`` server, without credentials."""


@attrs.frozen(kw_only=True)
class LoggedCall:
    """One call read back from the log; JSON columns as JSON values."""

    id: str
    """The call's id."""
    conversation_id: str
    """Its conversation."""
    started_at: str
    """When it started (ISO 8601, UTC)."""
    duration_ms: float | None
    """How long it took."""
    first_chunk_ms: float | None
    """How long until its first chunk."""
    provider: str
    """The route."""
    model: str
    """The model id."""
    base_url: str | None
    """The ``--base-url`` server, if any."""
    prompt: str
    """The prompt's text."""
    system: str | None
    """The system prompt."""
    options: dict[str, Any]
    """The other options."""
    user_message: dict[str, Any]
    """The user message (``dsh_llm.serde`` JSON)."""
    response: str
    """The answer's text."""
    reasoning: str
    """The answer's reasoning."""
    message: dict[str, Any]
    """The assistant message (``dsh_llm.serde`` JSON, with its replay state)."""
    usage: dict[str, Any] | None
    """The usage (protocol JSON), when reported."""
    finish: dict[str, Any]
    """The finish reason (protocol JSON)."""

    @property
    def ok(self) -> bool:
        """Whether the call succeeded (its finish is not ``error``/``aborted``)."""
        return self.finish.get("kind") not in _FAILED_KINDS

    def finish_reason(self) -> FinishReason:
        """The finish as a value.

        Raises:
            LlmError: ``INVALID_CHUNK`` when the stored JSON is not a finish.
        """
        chunk = chunk_from_dict({"type": Finish.TAG, "reason": self.finish})
        assert isinstance(chunk, Finish)
        return chunk.reason

    def token_usage(self) -> TokenUsage | None:
        """The usage as a value (``None`` when none was reported).

        Raises:
            LlmError: ``INVALID_CHUNK`` when the stored JSON is not a usage.
        """
        if self.usage is None:
            return None
        chunk = chunk_from_dict({"type": UsageChunk.TAG, "usage": self.usage})
        assert isinstance(chunk, UsageChunk)
        return chunk.usage

    def to_json(self) -> dict[str, Any]:
        """Every field as a JSON object (camelCase keys, as the protocol's)."""
        return {
            camel_key(name): value
            for name, value in attrs.asdict(self, recurse=False).items()
        }


# The columns a call is read from, in the order of LoggedCall's fields.
_FIELDS: Final = tuple(field.name for field in attrs.fields(LoggedCall))
_COLUMNS: Final = ", ".join(_FIELDS)
# The columns that hold JSON text (``usage`` is NULL when none was reported).
_JSON_COLUMNS: Final = frozenset(
    {"options", "user_message", "message", "usage", "finish"}
)


class LogStore:
    """An open log database (see the module docstring). Close it, or use it as a
    context manager."""

    def __init__(self, path: Path, *, create: bool = True) -> None:
        """Open (and migrate) the database at ``path``.

        Args:
            path: The database file.
            create: Create the file and its directory when missing; otherwise a
                missing file raises ``LogError``.

        Raises:
            LogError: see the module docstring.
        """
        self.path = path
        """The database file."""
        if not create and not path.is_file():
            raise LogError(f"no log database at {path}")
        try:
            if create:
                # Owner only: the log holds every prompt and answer. SQLite gives
                # its -wal and -shm files the database file's mode.
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            self._db = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_S, isolation_level=None
            )
        except (OSError, sqlite3.Error) as exc:
            raise self._error("cannot open", exc) from None
        try:
            with self._failures("cannot open"):
                # Before anything that writes (journal_mode does): a newer
                # version's file is left exactly as it is.
                self._refuse_newer(self._version())
                # WAL lets readers work beside one writer and survives a crash
                # mid-write; NORMAL sync is safe in WAL (a crash may lose the
                # last call, never corrupt the file).
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA foreign_keys=ON")
                self._migrate()
        except BaseException:
            self._db.close()
            raise

    def _error(self, doing: str, exc: BaseException) -> LogError:
        return LogError(f"{doing} the log database {self.path}: {exc}")

    @contextlib.contextmanager
    def _failures(self, doing: str) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise self._error(doing, exc) from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock now (waiting up to the busy timeout),
        # so two writers never both read a version and then both migrate.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            # SQLite may have rolled back already (a full disk, an I/O error).
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _version(self) -> int:
        found = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' "
            "AND name = 'schema_version'"
        ).fetchone()
        if found is None:
            return 0
        row = self._db.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    @property
    def version(self) -> int:
        """The schema version of the file."""
        with self._failures("cannot read"):
            return self._version()

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise LogError(
                f"the log database {self.path} has schema version {version}, "
                f"newer than this dsh-llm knows ({SCHEMA_VERSION}); upgrade dsh-llm"
            )

    def _migrate(self) -> None:
        if self._version() == SCHEMA_VERSION:
            return
        with self._transaction() as db:
            version = self._version()  # another process may have migrated meanwhile
            self._refuse_newer(version)
            if version == 0:
                db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    db.execute(statement)
            if version < SCHEMA_VERSION:
                db.execute("DELETE FROM schema_version")
                db.execute(
                    "INSERT INTO schema_version (version) VALUES (?)",
                    (SCHEMA_VERSION,),
                )

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._db.close()

    def __enter__(self) -> LogStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------------

    def add(self, record: CallRecord) -> str:
        """Write one call (and its conversation, on its first call); its id.

        Raises:
            LogError: see the module docstring.
        """
        response = record.response
        call_id = new_id()
        usage = None if response.usage is None else _usage_json(response.usage)
        finish = _finish_json(response.finish)
        row = (
            call_id,
            record.conversation_id,
            record.started_at,
            record.duration_ms,
            record.first_chunk_ms,
            record.provider,
            record.model,
            record.base_url,
            record.prompt,
            record.system,
            _json(dict(record.options)),
            _json(_message_to_dict(record.user_message)),
            response.message.text,
            response.message.reasoning,
            _json(_message_to_dict(response.message)),
            None if usage is None else _json(usage),
            _json(finish),
            response.finish.kind,
            None if response.usage is None else response.usage.input_tokens,
            None if response.usage is None else response.usage.output_tokens,
        )
        with self._failures("cannot write to"), self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO conversations (id, started_at, provider, "
                "model) VALUES (?, ?, ?, ?)",
                (
                    record.conversation_id,
                    record.started_at,
                    record.provider,
                    record.model,
                ),
            )
            db.execute(
                "INSERT INTO calls (id, conversation_id, started_at, duration_ms, "
                "first_chunk_ms, provider, model, base_url, prompt, system, options, "
                "user_message, response, reasoning, message, usage, finish, "
                "finish_kind, input_tokens, output_tokens) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
        return call_id

    # -- reading -----------------------------------------------------------------------

    def calls(
        self,
        *,
        limit: int | None = None,
        query: Sequence[str] = (),
        conversation_id: str | None = None,
    ) -> tuple[LoggedCall, ...]:
        """The last ``limit`` calls (all when ``None``), oldest first.

        Args:
            limit: How many, counting from the newest.
            query: Words that must each appear (case-insensitively for ASCII) in
                the prompt, the system prompt, the answer or its reasoning.
            conversation_id: Only this conversation's calls.

        Raises:
            LogError: see the module docstring.
        """
        where: list[str] = []
        values: list[Any] = []
        if conversation_id is not None:
            where.append("conversation_id = ?")
            values.append(conversation_id)
        for word in query:
            pattern = "%" + _escape_like(word) + "%"
            where.append(
                "("
                + " OR ".join(
                    f"{column} LIKE ? ESCAPE '\\'"
                    for column in ("prompt", "system", "response", "reasoning")
                )
                + ")"
            )
            values.extend([pattern] * 4)
        sql = f"SELECT {_COLUMNS} FROM calls"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            values.append(limit)
        with self._failures("cannot read"):
            rows = self._db.execute(sql, values).fetchall()
        return tuple(self._call(row) for row in reversed(rows))

    def _call(self, row: Sequence[Any]) -> LoggedCall:
        try:
            return LoggedCall(
                **{
                    name: json.loads(value)
                    if name in _JSON_COLUMNS and value is not None
                    else value
                    for name, value in zip(_FIELDS, row, strict=True)
                }
            )
        except (TypeError, ValueError) as exc:
            raise LogError(
                f"call {row[0]} in the log database {self.path} cannot be read: {exc}"
            ) from None

    def count(self) -> int:
        """How many calls are logged.

        Raises:
            LogError: see the module docstring.
        """
        with self._failures("cannot read"):
            row = self._db.execute("SELECT count(*) FROM calls").fetchone()
        return int(row[0])

    def last_conversation_id(self) -> str | None:
        """The conversation of the newest call (``None``: no call logged).

        Raises:
            LogError: see the module docstring.
        """
        with self._failures("cannot read"):
            row = self._db.execute(
                "SELECT conversation_id FROM calls ORDER BY rowid DESC LIMIT 1"
            ).fetchone()
        return None if row is None else str(row[0])

    def find_conversation(self, prefix: str) -> str | None:
        """The conversation whose id is ``prefix`` or starts with it.

        Returns:
            Its id; ``None`` when none matches.

        Raises:
            LogError: when several match (the message lists them), or see the
                module docstring.
        """
        with self._failures("cannot read"):
            rows = self._db.execute(
                "SELECT id FROM conversations WHERE id = ? OR substr(id, 1, ?) = ? "
                "ORDER BY id LIMIT 6",
                (prefix, len(prefix), prefix),
            ).fetchall()
        ids = [str(row[0]) for row in rows]
        if prefix in ids or len(ids) == 1:
            return prefix if prefix in ids else ids[0]
        if ids:
            raise LogError(
                f"several conversations start with {prefix!r} ({', '.join(ids)}...); "
                "give more of the id"
            )
        return None

    def conversation(self, conversation_id: str) -> tuple[Message, ...]:
        """The messages of the conversation's successful calls, in order: each
        call's user message, then its assistant message with its replay state.

        Raises:
            LogError: when a stored message cannot be read back, or see the
                module docstring.
        """
        messages: list[Message] = []
        for call in self.calls(conversation_id=conversation_id):
            if not call.ok:
                continue  # a failed turn was never part of the conversation
            try:
                messages.append(message_from_dict(call.user_message))
                messages.append(message_from_dict(call.message))
            except LlmError as exc:
                raise LogError(
                    f"call {call.id} in the log database {self.path} cannot be "
                    f"replayed: {exc.message}"
                ) from None
        return tuple(messages)


def _escape_like(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _usage_json(usage: TokenUsage) -> dict[str, Any]:
    value: dict[str, Any] = chunk_to_dict(UsageChunk(usage=usage))["usage"]
    return value


def _finish_json(reason: FinishReason) -> dict[str, Any]:
    value: dict[str, Any] = chunk_to_dict(Finish(reason=reason))["reason"]
    return value
