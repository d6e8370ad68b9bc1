"""The events of a Kineto trace decoded in large typed batches (msgspec), not one Python item at a time.

Most of a trace's bytes are CPU ops whose arguments the analysis never looks
at.  Here the decompressed bytes are cut into blocks at event boundaries (``}``
then ``,`` then ``{``) and each block is decoded by msgspec into small structs
that keep only the fields :func:`tprimat.trace.reader.read_trace` reads
(``ph``, ``cat``, ``name``, ``ts``, ``dur`` and ``args.stream``/``args.correlation``),
checking their types on the way; the others are skipped by the C decoder.  Gzip
is decompressed in a thread (zlib releases the GIL), so decompression and
decoding overlap on two cores.

Every trace is untrusted, and every step is linear in the bytes it is given
(the bounds are in :mod:`tprimat.trace.limits`):

* a block holding an event of the wrong shape is decoded again element by element,
  and each such element becomes a :class:`Malformed` (skipped and counted), not an error;
* a cut that lands inside a string (an event name holding ``}, {``) leaves a block
  that ends early: it is not cut there, and the next boundary is used instead;
* the bytes since the last boundary never exceed
  :data:`~tprimat.trace.limits.MAX_SPAN_BYTES`; nesting is bounded by the decoder's
  recursion limit;
* where the event array ends is found by the decoder (the first byte after the array),
  and what follows it is decoded as the document's remaining keys.

Anything that is not a well-formed trace raises :class:`~tprimat.trace.limits.BrokenTrace`
with the event count and the byte offset (in the decompressed text) where it happened.
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Generator, Iterator
from typing import IO, Annotated, Any

import msgspec

from tprimat.trace.categories import ACTIVITY_CATEGORIES, canonical_category
from tprimat.trace.limits import (
    MAX_ABS_TS_US,
    MAX_DUR_US,
    MAX_SPAN_BYTES,
    BrokenTrace,
    depth_text,
    describe_event,
    mib,
    span_text,
)

#: Decompressed bytes per decoded block.
BLOCK_BYTES = 8 * 1024 * 1024
#: Bytes read at a time while looking for the event array at the start of a trace.
HEAD_READ_BYTES = 64 * 1024
#: ``"traceEvents"`` keys nested inside the metadata before the real one that are looked past.
MAX_NESTED_KEYS = 16


# gc=False: decoded values can never refer back to a struct, so no cycle can form, and the
# collector's passes over hundreds of thousands of young structs (half the decode time) are saved.
class Args(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    """The two event arguments the analysis reads (None: not in the event); checked where used."""

    stream: Any = None
    correlation: Any = None


class Event(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    """One trace event: the fields the reader uses, their types checked by the decoder."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    ts: Annotated[float, msgspec.Meta(ge=-MAX_ABS_TS_US, le=MAX_ABS_TS_US)] | None = None
    dur: Annotated[float, msgspec.Meta(ge=0.0, le=MAX_DUR_US)] | None = None
    args: Args | None = None


class Malformed:
    """An element of the event array that is skipped: what is wrong with it, and whether it
    claims to be GPU activity."""

    __slots__ = ("activity", "problem")

    def __init__(self, problem: str, activity: bool = False) -> None:
        self.problem = problem
        self.activity = activity


_BLOCK = msgspec.json.Decoder(list[Event])
_RAWS = msgspec.json.Decoder(list[msgspec.Raw])
_EVENT = msgspec.json.Decoder(Event)
_ANY = msgspec.json.Decoder()

_SPACE = re.compile(rb"[ \t\r\n]*")
_AFTER_BRACE = re.compile(rb"[ \t\r\n]*,[ \t\r\n]*\{")
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_ARRAY_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
_AT_BYTE = re.compile(r"\s*\(byte (\d+)\)")
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")
#: Bytes before a block's end searched again for a boundary completed by the next block.
_LOOKBACK = 64
#: ``}`` tried from the end before the boundary is searched for with a regular expression.
_QUICK_TRIES = 16


class _EndsEarly(Exception):
    """Decoded text that stops inside a value: a cut inside a string, or a truncated trace."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


def _decode_problem(exc: Exception, offset: int) -> str:
    """msgspec's message with its byte offset made absolute (``offset``: the buffer's first byte)."""
    text = str(exc).strip() or type(exc).__name__
    match = _AT_BYTE.search(text)
    if match:
        text = f"{text[: match.start()]} at byte {offset + int(match.group(1))}{text[match.end() :]}"
    return text.splitlines()[0][:200]


def _too_deep(where: str) -> BrokenTrace:
    return BrokenTrace(f"refused: nested deeper than {depth_text()} {where}")


# -- reading blocks ---------------------------------------------------------------------------


def _blocks(fh: IO[bytes], threaded: bool) -> Iterator[bytes]:
    """The stream's bytes in blocks; read (and decompressed) by a thread when ``threaded``."""
    if threaded:
        yield from _threaded_blocks(fh)
        return
    while block := fh.read(BLOCK_BYTES):
        yield block


def _threaded_blocks(fh: IO[bytes]) -> Iterator[bytes]:
    ready: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def produce() -> None:
        try:
            while not stop.is_set():
                block = fh.read(BLOCK_BYTES)
                ready.put(block or None)
                if not block:
                    return
        except BaseException as exc:  # handed to the reader
            ready.put(exc)

    worker = threading.Thread(target=produce, name="trace-read", daemon=True)
    worker.start()
    try:
        while True:
            item = ready.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():
            try:
                ready.get_nowait()
            except queue.Empty:
                worker.join(0.01)


def _last_boundary(data: bytes | bytearray, low: int) -> int:
    """The offset just after the last ``}`` at or after ``low`` that is followed by ``,`` and ``{``
    (0: none).  Linear in the bytes searched, whatever they hold."""
    position = data.rfind(b"}", low)
    for _ in range(_QUICK_TRIES):
        if position < 0:
            return 0
        if _AFTER_BRACE.match(data, position + 1):
            return position + 1
        position = data.rfind(b"}", low, position)
    last = 0
    for match in _BOUNDARY.finditer(data, low):
        last = match.start() + 1
    return last


# -- decoding the event array -----------------------------------------------------------------


class _ArrayEnds(Exception):
    """Decoded text in which the event array closes before the text ends (``reported``: where
    the decoder found the first character after it)."""

    def __init__(self, reported: int) -> None:
        super().__init__(reported)
        self.reported = reported


class EventArray:
    """The elements of an event array from blocks of its text: cut at event boundaries, decoded
    in batches, with the bytes kept between two boundaries bounded.  A subclass that sets
    :attr:`block_decoder` and :attr:`event_decoder` decodes other fields of the same events."""

    block_decoder: msgspec.json.Decoder = _BLOCK  # "[" + events + "]" -> list of structs
    event_decoder: msgspec.json.Decoder = _EVENT  # one event -> struct

    def __init__(self, offset: int) -> None:
        self.pending = bytearray(b"[")  # "[" and the text after the last cut
        self.offset = offset  # where pending[1] is in the decompressed text
        self.floor = 1  # boundaries are looked for from here on (past a cut that ended early)
        self.count = 0  # elements decoded
        self.tail: bytearray | None = None  # the text after the array, once the array has closed
        self.tail_offset = 0

    def feed(self, block: bytes) -> list[Any]:
        """The complete events once ``block`` is added (those after the last boundary wait)."""
        if self.tail is not None:
            self.tail += block
            if len(self.tail) > MAX_SPAN_BYTES:
                raise BrokenTrace(
                    f"refused: more than {mib(MAX_SPAN_BYTES)} after the event array, from byte "
                    f"{self.tail_offset} ({span_text()})",
                    limit=True,
                )
            return []
        pending = self.pending
        low = max(self.floor, len(pending) - _LOOKBACK)
        pending += block
        cut = _last_boundary(pending, low)
        events = self._cut(cut) if cut else []
        if self.tail is None and len(pending) - 1 > MAX_SPAN_BYTES:
            raise BrokenTrace(
                f"refused: event #{self.count} (from byte {self.offset}) runs past {mib(MAX_SPAN_BYTES)} "
                f"without a boundary between two events ({span_text()})",
                limit=True,
            )
        return events

    def _cut(self, cut: int) -> list[Any]:
        pending = self.pending
        comma = pending.index(b",", cut)
        pending[comma] = 93  # "]": the events up to the cut are a JSON array, decoded in place
        try:
            with memoryview(pending) as whole, whole[: comma + 1] as view:
                events = self._decode(view)
        except _EndsEarly:
            # The "boundary" is inside a string: keep the bytes, cut at a later boundary.
            pending[comma] = 44
            self.floor = cut
            return []
        except _ArrayEnds as ended:
            # The "boundary" is in the metadata after the array (a list of device properties).
            pending[comma] = 44
            return self._close(pending, ended.reported)
        pending[: comma + 1] = b"["
        self.offset += comma
        self.floor = 1
        return events

    def _close(self, text: bytes | bytearray, reported: int) -> list[Any]:
        """The last events of the array in ``text`` (``pending``'s bytes); what follows the
        array becomes :attr:`tail`."""
        end = _array_end(text, reported)
        try:
            with memoryview(text) as whole, whole[:end] as view:
                events = self._final(view)
        except _ArrayEnds:
            raise BrokenTrace(
                f"malformed trace: the event array ends twice, near byte {self.offset - 1 + end}"
            ) from None
        self.tail = bytearray(text[end:])
        self.tail_offset = self.offset - 1 + end
        self.pending = bytearray()
        return events

    def _decode(self, text: memoryview | bytes) -> list[Any]:
        """The elements of the JSON array ``text`` (a block's "[" + events + "]")."""
        try:
            events = self.block_decoder.decode(text)
        except (msgspec.ValidationError, UnicodeDecodeError):
            events = self._one_by_one(bytes(text))
        except msgspec.DecodeError as exc:
            raise self._error(exc) from None
        except RecursionError:
            raise _too_deep(f"in event #{self.count} or after it") from None
        self.count += len(events)
        return events

    def _one_by_one(self, text: bytes) -> list[Any]:
        try:
            raws = _RAWS.decode(text)
        except msgspec.DecodeError as exc:
            raise self._error(exc) from None
        except RecursionError:
            raise _too_deep(f"in event #{self.count} or after it") from None
        events: list[Any] = []
        for raw in raws:
            try:
                events.append(self.event_decoder.decode(raw))
            except (msgspec.ValidationError, UnicodeDecodeError):
                events.append(_malformed(raw))
            except msgspec.DecodeError as exc:
                problem = _AT_BYTE.sub("", str(exc)).splitlines()[0][:200]
                raise BrokenTrace(f"malformed trace: event #{self.count + len(events)} ({problem})") from None
            except RecursionError:
                raise _too_deep(f"in event #{self.count + len(events)}") from None
        return events

    def _error(self, exc: msgspec.DecodeError) -> Exception:
        """``_EndsEarly`` when the text ends inside a value, ``_ArrayEnds`` when the array closes
        before the text ends, else the malformed-JSON error."""
        text = str(exc)
        if "truncated" in text:
            return _EndsEarly(text)
        trailing = _TRAILING.search(text)
        if trailing is not None:
            return _ArrayEnds(int(trailing.group(1)))
        return BrokenTrace(
            f"truncated or malformed trace after {self.count} events ({_decode_problem(exc, self.offset - 1)})"
        )

    def _final(self, text: memoryview | bytes) -> list[Any]:
        """The elements of ``text``, which must hold them all (``_ArrayEnds`` where it holds more)."""
        try:
            return self._decode(text)
        except _EndsEarly:
            raise BrokenTrace(
                f"truncated or malformed trace after {self.count} events (the JSON text ends early: a truncated file?)"
            ) from None

    def finish(self, prefix: str, after: dict[str, Any]) -> list[Any]:
        """The last events, once every block is in; the document's keys after the array go to ``after``."""
        events: list[Any] = []
        if self.tail is None:
            rest = bytes(self.pending)  # "[", the last events, and the end of the document
            try:
                events = self._final(rest)
            except _ArrayEnds as ended:
                events = self._close(rest, ended.reported)
        if prefix == "item":
            if self.tail is not None and bytes(self.tail).strip():
                raise BrokenTrace(f"malformed trace: text after the event array at byte {self.tail_offset}")
        elif self.tail is None:
            raise BrokenTrace("truncated trace: the document ends after its event array")
        else:
            after.update(_members_after(bytes(self.tail), self.tail_offset))
        return events

    def finish_range(self) -> list[Any]:
        """The last events of a range of the array (which ends after an event's ``}``)."""
        if self.tail is not None:
            raise BrokenTrace("the event array ends inside a range of its events")
        if not bytes(self.pending[1:]).strip():
            return []
        try:
            return self._final(bytes(self.pending) + b"]")
        except _ArrayEnds:
            raise BrokenTrace("the event array ends inside a range of its events") from None


def _array_end(text: bytes | bytearray, reported: int) -> int:
    """The offset just after the array that starts ``text``, from where the decoder found the
    first character after it (``reported``: that character's offset plus one, as msgspec counts)."""
    end = reported - 1
    close = text.rfind(b"]", 0, max(end, 0))
    if not 0 < end < len(text) or text[end] in b" \t\r\n" or close < 0 or bytes(text[close + 1 : end]).strip():
        raise BrokenTrace(f"malformed trace: cannot tell where the event array ends (near byte {end})")
    return end


def _malformed(raw: msgspec.Raw) -> Malformed:
    """The element ``raw`` as a skipped event, with what is wrong with it."""
    try:
        value = _ANY.decode(raw)
    except UnicodeDecodeError:
        return Malformed("a string is not valid UTF-8")
    except msgspec.ValidationError:
        return Malformed("a number is beyond the range of a double")
    cat = value.get("cat") if isinstance(value, dict) else None
    return Malformed(describe_event(value), activity=canonical_category(cat) in ACTIVITY_CATEGORIES)


def _members_after(text: bytes, offset: int) -> dict[str, Any]:
    """The keys of the document after its event array: ``text`` is ``, "key": value … }``."""
    stripped = text.lstrip()
    body = stripped[1:] if stripped.startswith(b",") else stripped
    if not stripped.startswith((b",", b"}")):
        raise BrokenTrace(f"malformed trace: unexpected text after the event array at byte {offset}")
    try:
        value = _ANY.decode(b"{" + body)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise BrokenTrace(f"malformed metadata after the events ({_decode_problem(exc, offset)})") from None
    except RecursionError:
        raise _too_deep("in the metadata after the events") from None
    value.pop("traceEvents", None)
    return value


def fast_events(
    fh: IO[bytes],
    prefix: str,
    after: dict[str, Any],
    threaded: bool,
    start: int,
    array_type: type[EventArray] = EventArray,
) -> Generator[Any, None, None]:
    """The elements of the event array of the open trace ``fh``: :class:`Event` or :class:`Malformed`.

    ``start``: the offset of the byte after the array's ``[`` (:func:`read_head`), or of the
    byte after an element's ``,`` (see :func:`element_boundary`) to read from there on.
    ``prefix``: ``"traceEvents.item"`` when the array is the document's ``traceEvents``
    (its keys after the array go to ``after``), ``"item"`` when the document is the array.
    ``array_type``: an :class:`EventArray` subclass that decodes other fields.
    Raises :class:`BrokenTrace` where the text is not such an array, or is past a limit.
    """
    array = array_type(start)
    try:
        fh.seek(start)
        for block in _blocks(fh, threaded):
            yield from array.feed(block)
        yield from array.finish(prefix, after)
    except BrokenTrace as exc:
        raise exc.after_events(array.count) from None


def range_events(fh: IO[bytes], start: int, end: int, array_type: type[EventArray] = EventArray) -> Iterator[Any]:
    """The events whose text is bytes ``start`` to ``end`` of the open plain trace ``fh``.

    ``start`` is the byte after the event array's ``[`` or after an element's ``,``; ``end``
    the byte after an event's closing ``}`` (see :func:`element_boundary`).  Raises
    :class:`BrokenTrace` where the bytes are not such events.  ``array_type`` as for :func:`fast_events`.
    """
    fh.seek(start)
    remaining = end - start
    array = array_type(start)
    while remaining > 0:
        block = fh.read(min(BLOCK_BYTES, remaining))
        if not block:
            raise BrokenTrace("the trace ended inside a range of its events")
        remaining -= len(block)
        yield from array.feed(block)
    yield from array.finish_range()


#: Bytes searched after an offset for the next boundary between two events.
BOUNDARY_WINDOW = 1 << 20


def element_boundary(fh: IO[bytes], offset: int) -> tuple[int, int] | None:
    """The first ``}``, ``,``, ``{`` at or after ``offset`` of the open plain trace ``fh``, as
    (the byte after the ``}``, the byte after the ``,``); None when the next
    :data:`BOUNDARY_WINDOW` bytes hold none.

    Such a boundary may lie inside a string of an event (a name holding ``}, {``): the ranges
    cut there then fail to decode, and the caller reads the trace whole instead.
    """
    fh.seek(offset)
    data = fh.read(BOUNDARY_WINDOW)
    match = _BOUNDARY.search(data)
    if match is None:
        return None
    comma = data.index(b",", match.start())
    return offset + match.start() + 1, offset + comma + 1


# -- the document before the event array --------------------------------------------------------


def read_head(fh: IO[bytes]) -> tuple[str, dict[str, Any], int]:
    """Where the event array of the open trace ``fh`` starts, and the metadata written before it.

    Returns (``"traceEvents.item"`` or ``"item"`` for a document that is the array itself,
    the document's keys before ``traceEvents``, the offset of the byte after the array's
    ``[``).  Reads at most :data:`~tprimat.trace.limits.MAX_SPAN_BYTES` of the document.
    """
    data = bytearray()
    searched = 0  # "traceEvents" keys before this offset were tried
    nested = 0
    first: int | None = None  # offset of the document's first byte that is not white space
    while True:
        block = fh.read(min(max(HEAD_READ_BYTES, len(data)), MAX_SPAN_BYTES + 1 - len(data)))
        data += block
        if first is None:
            at = _SPACE.match(data).end()  # type: ignore[union-attr]
            first = at if at < len(data) else None
        if first is not None:
            if data[first] == 91:  # "["
                return "item", {}, first + 1
            if data[first] != 123:  # "{"
                raise BrokenTrace(
                    f"not a readable JSON trace (it starts with {bytes(data[first : first + 1])!r}, not {{ or [)"
                )
            for match in _ARRAY_KEY.finditer(data, searched):
                metadata = _members_before(data, match.start())
                if metadata is not None:
                    return "traceEvents.item", metadata, match.end()
                nested += 1
                if nested > MAX_NESTED_KEYS:
                    raise BrokenTrace(
                        f"refused: more than {MAX_NESTED_KEYS} nested traceEvents keys before the document's own"
                    )
                searched = match.start() + 1
            partial = data.rfind(b'"traceEvents"', searched)
            searched = partial if partial >= 0 else max(searched, len(data) - len(b'"traceEvents"'))
        if not block:
            return _no_array(data, first)
        if len(data) > MAX_SPAN_BYTES:
            raise BrokenTrace(f"refused: no traceEvents array in the first {mib(MAX_SPAN_BYTES)} ({span_text()})")


def _members_before(data: bytearray, key: int) -> dict[str, Any] | None:
    """The document's keys before the ``"traceEvents"`` key at offset ``key``; None when that
    key belongs to a value nested in the document, not to the document itself."""
    try:
        value = _ANY.decode(bytes(data[:key]) + b'"traceEvents":[]}')
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        if "truncated" in str(exc):
            return None  # the key's object is not closed by our "}": it is nested
        raise BrokenTrace(f"not a readable JSON trace ({_decode_problem(exc, 0)})") from None
    except RecursionError:
        raise _too_deep("in the metadata before the events") from None
    value.pop("traceEvents", None)
    return value


def _no_array(data: bytearray, first: int | None) -> tuple[str, dict[str, Any], int]:
    """The error for a whole document without a top-level event array."""
    if first is None:
        raise BrokenTrace("not a readable JSON trace (the file is empty)")
    try:
        _ANY.decode(bytes(data))
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise BrokenTrace(f"not a readable JSON trace ({_decode_problem(exc, 0)})") from None
    except RecursionError:
        raise _too_deep("in the document") from None
    raise BrokenTrace("no traceEvents array: not a Chrome/Kineto trace")


__all__ = [
    "BLOCK_BYTES",
    "Event",
    "EventArray",
    "Malformed",
    "element_boundary",
    "fast_events",
    "range_events",
    "read_head",
]
