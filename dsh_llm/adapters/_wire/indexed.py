"""``IndexedTranslator``: the base of a translator whose wire numbers its content
blocks (the Anthropic Messages stream's ``index``, Bedrock ConverseStream's
``contentBlockIndex``).

It keeps what stands at each wire index (``blocks``: a writer item, or a
family's own marker for a block the protocol passes over) and reads payload
fields; a field of the wrong type is the provider's malformed answer
(``BlockWriter.malformed``), never a crash:

- ``slot(payload, needs=...)``: the index a payload names (an int >= 0) and
  what stands there (``None``: nothing yet; given ``needs``, the event that
  needs a started block, nothing is ``MALFORMED_RESPONSE``);
- ``new_index(payload)``: the index of a block that starts (a second start at
  one index is ``MALFORMED_RESPONSE``);
- ``string(payload, field)``: a string field, ``""`` when absent or ``null``.
"""

from __future__ import annotations

from typing import Any
from typing import ClassVar
from typing import TypeVar

from dsh_llm.adapters._wire.translator import WireTranslator
from dsh_llm.adapters._wire.writer import Block

E = TypeVar("E")


class IndexedTranslator(WireTranslator[E]):
    """Base of a translator of numbered content blocks (see the module
    docstring).

    Args:
        provider: Display name used in messages.
        empty_response_as_stop: Report a blockless successful finish as a plain
            ``stop`` instead of ``EMPTY_RESPONSE``.
    """

    index_field: ClassVar[str]
    """The payload field that numbers a content block."""
    index_name: ClassVar[str]
    """The index as messages name it."""
    start_event: ClassVar[str]
    """The event that starts a block, as messages name it."""

    def __init__(self, *, provider: str, empty_response_as_stop: bool = False) -> None:
        super().__init__(
            provider=provider, empty_response_as_stop=empty_response_as_stop
        )
        self.blocks: dict[int, Block | object] = {}
        """What stands at each wire index: its writer item or a family's marker."""
        # Read at every event: an instance attribute is the quickest lookup.
        self._index_field = self.index_field

    def slot(
        self, payload: dict[str, Any], needs: str | None = None
    ) -> tuple[int, Block | object | None]:
        """The index ``payload`` names and what stands there (``None``: nothing).

        Args:
            payload: The event's payload.
            needs: The event, when it needs a block started at the index.

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` for an index that is not an int
                >= 0, or (given ``needs``) one where no block started.
        """
        index = payload.get(self._index_field)
        if type(index) is not int or index < 0:
            raise self.writer.malformed(
                f"a {self.index_name} that is not an integer >= 0"
            )
        block = self.blocks.get(index)
        if block is None and needs is not None:
            raise self.writer.malformed(
                f"a {needs} for block {index}, which never started"
            )
        return index, block

    def new_index(self, payload: dict[str, Any]) -> int:
        """The index of the block ``payload`` starts.

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` for a bad index or one where a block
                already began.
        """
        index, known = self.slot(payload)
        if known is not None:
            raise self.writer.malformed(
                f"a {self.start_event} for block {index}, which already began"
            )
        return index

    def string(self, payload: dict[str, Any], field: str) -> str:
        """``payload[field]``, ``""`` when absent or ``null``.

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` when it is not a string.
        """
        value = payload.get(field)
        if value is None:
            return ""
        if type(value) is not str:
            raise self.writer.malformed(f"a {field} that is not a string")
        return value
