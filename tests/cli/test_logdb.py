"""``dsh_llm.cli.logdb``: the log database's schema, its migrations, reading back
what was written, and several processes writing at once."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_llm.assembler import AssembledResponse
from dsh_llm.cli.logdb import MIGRATIONS
from dsh_llm.cli.logdb import SCHEMA_VERSION
from dsh_llm.cli.logdb import CallRecord
from dsh_llm.cli.logdb import LogError
from dsh_llm.cli.logdb import LogStore
from dsh_llm.cli.logdb import new_id
from dsh_llm.cli.logdb import utc_now
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_user_message

ROOT = Path(__file__).parents[2]


def _record(
    conversation: str,
    prompt: str,
    answer: str,
    *,
    finish: FinishReason = FinishReason.STOP,
    replay: ReplayEnvelope | None = None,
) -> CallRecord:
    message = create_assistant_message(
        (ReasoningBlock(text=f"thinking about {prompt}"), TextBlock(text=answer)),
        provider="anthropic",
        model="claude-haiku-4-5",
        replay_state=replay,
    )
    return CallRecord(
        conversation_id=conversation,
        provider="anthropic",
        model="claude-haiku-4-5",
        prompt=prompt,
        system="Be brief.",
        options={"temperature": 0.2},
        user_message=create_user_message(prompt),
        response=AssembledResponse(
            message=message,
            usage=TokenUsage(input_tokens=11, output_tokens=5, reasoning_tokens=2),
            finish=finish,
        ),
        started_at=utc_now(),
        duration_ms=12.5,
        first_chunk_ms=3.25,
    )


def test_a_new_database_has_the_current_schema_and_is_owner_only(tmp_path):
    path = tmp_path / "data" / "logs.db"
    with LogStore(path) as store:
        assert store.version == SCHEMA_VERSION == len(MIGRATIONS)
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        db.close()


def test_what_is_written_is_read_back_field_by_field(tmp_path):
    envelope = ReplayEnvelope(response={"id": "msg_1"}, blocks=({"sig": "s1"}, None))
    record = _record("c1", "hello", "Hi!", replay=envelope)
    with LogStore(tmp_path / "logs.db") as store:
        call_id = store.add(record)
        (call,) = store.calls()
        messages = store.conversation("c1")

    assert call.id == call_id
    assert (call.conversation_id, call.provider, call.model) == (
        "c1",
        "anthropic",
        "claude-haiku-4-5",
    )
    assert (call.prompt, call.system, call.response) == ("hello", "Be brief.", "Hi!")
    assert call.reasoning == "thinking about hello"
    assert call.options == {"temperature": 0.2}
    assert (call.duration_ms, call.first_chunk_ms) == (12.5, 3.25)
    assert call.usage == {"inputTokens": 11, "outputTokens": 5, "reasoningTokens": 2}
    assert call.finish == {"kind": "stop"}
    assert call.finish_reason() == FinishReason.STOP
    assert call.token_usage() == record.response.usage
    # The assistant message keeps its source and its replay state.
    user, assistant = messages
    assert user == record.user_message
    assert assistant == record.response.message
    assert isinstance(assistant.source, ModelSource)
    assert assistant.source.replay_state == envelope
    assert json.loads(json.dumps(call.to_json()))["message"]["source"]["kind"] == (
        "model"
    )


def test_a_conversation_replays_only_its_successful_turns_in_order(tmp_path):
    failure = LlmFailure(message="boom", code="SERVER")
    with LogStore(tmp_path / "logs.db") as store:
        store.add(_record("c1", "one", "1"))
        store.add(_record("c2", "other", "x"))
        store.add(_record("c1", "two", "", finish=FinishReason.error(failure)))
        store.add(_record("c1", "three", "3"))
        texts = [m.text for m in store.conversation("c1")]
        assert store.last_conversation_id() == "c1"
        assert [c.prompt for c in store.calls(conversation_id="c1")] == [
            "one",
            "two",
            "three",
        ]
        (failed,) = [c for c in store.calls() if not c.ok]
    assert texts == ["one", "1", "three", "3"]
    assert failed.finish_reason().failure == failure


def test_calls_lists_the_newest_oldest_first_and_searches_every_word(tmp_path):
    with LogStore(tmp_path / "logs.db") as store:
        for n in range(5):
            store.add(_record("c", f"prompt {n} 100%_done", f"answer {n}"))
        assert [c.prompt[:8] for c in store.calls(limit=2)] == ["prompt 3", "prompt 4"]
        assert [c.response for c in store.calls(query=["ANSWER", "2"])] == ["answer 2"]
        # LIKE's wildcards are searched for as text.
        assert len(store.calls(query=["100%_done"])) == 5
        assert store.calls(query=["100%x"]) == ()
        assert store.count() == 5


def test_a_conversation_is_found_by_a_unique_prefix(tmp_path):
    with LogStore(tmp_path / "logs.db") as store:
        store.add(_record("abc111", "a", "a"))
        store.add(_record("abc222", "b", "b"))
        assert store.find_conversation("abc1") == "abc111"
        assert store.find_conversation("abc222") == "abc222"
        assert store.find_conversation("zzz") is None
        with pytest.raises(LogError, match="several conversations start with 'abc'"):
            store.find_conversation("abc")


# --- migrations ---------------------------------------------------------------------

# The schema the first version wrote, as that version wrote it: written out here
# (not taken from MIGRATIONS), so a change to MIGRATIONS[0] cannot hide a break.
VERSION_1 = (
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    "INSERT INTO schema_version VALUES (1)",
    """CREATE TABLE conversations (id TEXT PRIMARY KEY, started_at TEXT NOT NULL,
        provider TEXT NOT NULL, model TEXT NOT NULL)""",
    """CREATE TABLE calls (id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations(id),
        started_at TEXT NOT NULL, duration_ms REAL, provider TEXT NOT NULL,
        model TEXT NOT NULL, prompt TEXT NOT NULL, system TEXT,
        options TEXT NOT NULL, user_message TEXT NOT NULL, response TEXT NOT NULL,
        reasoning TEXT NOT NULL, message TEXT NOT NULL, usage TEXT,
        finish TEXT NOT NULL, finish_kind TEXT NOT NULL, input_tokens INTEGER,
        output_tokens INTEGER)""",
)


def _old_database(path: Path) -> None:
    user = create_user_message("from the old days")
    assistant = create_assistant_message(
        "an old answer", provider="deepseek-official", model="deepseek-v4-flash"
    )
    from dsh_llm.serde import message_to_dict

    db = sqlite3.connect(path)
    try:
        for statement in VERSION_1:
            db.execute(statement)
        db.execute(
            "INSERT INTO conversations VALUES ('old', '2024-01-01T00:00:00.000Z', "
            "'deepseek-official', 'deepseek-v4-flash')"
        )
        db.execute(
            "INSERT INTO calls VALUES ('call-1', 'old', '2024-01-01T00:00:00.000Z', "
            "40.0, 'deepseek-official', 'deepseek-v4-flash', 'from the old days', "
            "NULL, '{}', ?, 'an old answer', '', ?, NULL, '{\"kind\":\"stop\"}', "
            "'stop', NULL, NULL)",
            (
                json.dumps(message_to_dict(user)),
                json.dumps(message_to_dict(assistant)),
            ),
        )
        db.commit()
    finally:
        db.close()


def test_a_database_of_the_first_version_is_migrated_keeping_its_calls(tmp_path):
    path = tmp_path / "logs.db"
    _old_database(path)

    with LogStore(path) as store:
        assert store.version == SCHEMA_VERSION
        (old,) = store.calls()
        assert (old.prompt, old.response, old.first_chunk_ms, old.base_url) == (
            "from the old days",
            "an old answer",
            None,
            None,
        )
        # The old conversation goes on in the new schema.
        store.add(_record("old", "and now?", "now"))
        assert [m.text for m in store.conversation("old")] == [
            "from the old days",
            "an old answer",
            "and now?",
            "now",
        ]
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT version FROM schema_version").fetchall() == [
            (SCHEMA_VERSION,)
        ]
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        assert "calls_by_conversation" in indexes
    finally:
        db.close()


def test_a_database_of_a_newer_version_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "logs.db"
    _old_database(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    before = path.read_bytes()

    with pytest.raises(LogError, match="newer than this dsh-llm knows"):
        LogStore(path)
    assert path.read_bytes() == before


def test_a_file_that_is_not_a_database_is_a_log_error(tmp_path):
    path = tmp_path / "logs.db"
    path.write_bytes(b"not a database at all, just some text " * 200)
    with pytest.raises(LogError, match=r"logs\.db"):
        LogStore(path)
    with pytest.raises(LogError, match="no log database"):
        LogStore(tmp_path / "missing.db", create=False)


# --- several processes at once ------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from dsh_llm.cli.logdb import LogStore
    from tests.cli.test_logdb import _record

    path, start, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    count = int(sys.argv[4])
    while not start.exists():  # every writer starts together
        time.sleep(0.001)
    for n in range(count):
        # A fresh connection per call, as each chat command opens its own.
        with LogStore(path) as store:
            store.add(_record(name, f"{name} prompt {n}", f"{name} answer {n}"))
    """
)


def test_processes_writing_at_once_lose_and_corrupt_nothing(tmp_path):
    path = tmp_path / "fresh" / "logs.db"  # created (and migrated) by the race itself
    start = tmp_path / "go"
    writers, each = 6, 15
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(start), f"w{n}", str(each)],
            env=env,
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    start.touch()
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err

    with LogStore(path) as store:
        calls = store.calls()
        assert store.version == SCHEMA_VERSION
    assert len(calls) == writers * each
    for n in range(writers):
        mine = [c.prompt for c in calls if c.conversation_id == f"w{n}"]
        # Each writer's calls are all there, in the order it wrote them.
        assert mine == [f"w{n} prompt {i}" for i in range(each)]
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        db.close()


def test_new_ids_are_unique_and_times_are_utc():
    assert len({new_id() for _ in range(1000)}) == 1000
    now = utc_now()
    assert now.endswith("Z")
    assert now[10] == "T"
    assert len(now) == 24
