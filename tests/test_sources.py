"""dsh_llm.sources: taking and releasing a chunk source."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsh_llm.sources import chunk_source
from dsh_llm.sources import close_source


def test_chunk_source_names_the_caller_for_a_non_iterable() -> None:
    assert list(chunk_source([1, 2], "reader")) == [1, 2]
    with pytest.raises(TypeError, match=r"^reader\(\) expects chunks .* got int$"):
        chunk_source(5, "reader")  # type: ignore[arg-type]


def test_chunk_source_lets_an_iterable_s_own_type_error_through() -> None:
    class Broken:
        def __iter__(self) -> Iterator[int]:
            raise TypeError("broken iterable")

    with pytest.raises(TypeError, match=r"^broken iterable$"):
        chunk_source(Broken(), "reader")


def test_close_source_closes_what_can_be_closed_and_ignores_the_rest() -> None:
    def generator() -> Iterator[int]:
        yield 1

    source = generator()
    next(source)
    close_source(source)
    with pytest.raises(StopIteration):
        next(source)
    close_source(iter([1]))  # no close(): nothing to do

    class NotCallable:
        close = "not a method"

    close_source(NotCallable())
