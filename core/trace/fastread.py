"""The events of a Kineto trace decoded in large typed batches (msgspec), not one Python item at a time.

``ijson`` builds a Python dict for every event and every nested argument; most
of a trace's bytes are CPU ops whose arguments the analysis never looks at.
Here the decompressed bytes are cut into blocks at event boundaries (``}`` then
``,`` then ``{``) and each block is decoded by msgspec into small structs that
keep only the fields :func:`tprimat.trace.reader.read_trace` reads (``ph``,
``cat``, ``name``, ``ts``, ``dur`` and ``args.stream``/``args.correlation``);
the others are skipped by the C decoder.  Gzip is decompressed in a thread (zlib
releases the GIL), so decompression and decoding overlap on two cores.

A block that does not decode (a cut inside a string, an event that is not an
object, an unexpected type) is handed to ``ijson`` instead, as is the end of the
array, so every trace reads exactly as the item-by-item reader reads it.
"""

from __future__ import annotations

import io
import queue
import re
import threading
from collections.abc import Iterator
from typing import IO, Any

import msgspec

#: Bytes of the document's end handed back for the metadata written after the events.
TAIL_BYTES = 1 << 18
#: Decompressed bytes per decoded block.
BLOCK_BYTES = 8 * 1024 * 1024

_ARRAY_START = re.compile(rb'"traceEvents"\s*:\s*\[')
_UNSET = msgspec.UNSET


# gc=False: decoded values can never refer back to a struct, so no cycle can form, and the
# collector's passes over hundreds of thousands of young structs (half the decode time) are saved.
class Args(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    """The two event arguments the analysis reads (UNSET: not in the event)."""

    stream: Any = _UNSET
    correlation: Any = _UNSET

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key, _UNSET)
        return default if value is _UNSET else value

    def __contains__(self, key: str) -> bool:
        return getattr(self, key, _UNSET) is not _UNSET

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key, _UNSET)
        if value is _UNSET:
            raise KeyError(key)
        return value


class Event(msgspec.Struct, forbid_unknown_fields=False, gc=False):
    """One trace event, with ``dict.get`` semantics for the fields the reader uses."""

    ph: Any = _UNSET
    cat: Any = _UNSET
    name: Any = _UNSET
    ts: Any = _UNSET
    dur: Any = _UNSET
    args: Args | None | msgspec.UnsetType = _UNSET

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key, _UNSET)
        return default if value is _UNSET else value

    def __getitem__(self, key: str) -> Any:
        value = getattr(self, key, _UNSET)
        if value is _UNSET:
            raise KeyError(key)
        return value


_BLOCK = msgspec.json.Decoder(list[Event])


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


def _skip_space(data: bytes | bytearray, index: int) -> int:
    """The first offset at or after ``index`` that is not JSON white space (``len(data)``: none)."""
    while index < len(data) and data[index] in b" \t\r\n":
        index += 1
    return index


def _last_boundary(data: bytes | bytearray) -> int:
    """The offset just after the last ``}`` that is followed by ``,`` and ``{`` (0: none)."""
    position = data.rfind(b"}")
    while position >= 0:
        if _comma_after(data, position) >= 0:
            return position + 1
        position = data.rfind(b"}", 0, position)
    return 0


def _comma_after(data: bytes | bytearray, position: int) -> int:
    """The offset of the ``,`` when the ``}`` at ``position`` is followed by ``,`` and ``{``; else -1."""
    comma = _skip_space(data, position + 1)
    if comma < len(data) and data[comma] == 44:  # ","
        after = _skip_space(data, comma + 1)
        if after < len(data) and data[after] == 123:  # "{"
            return comma
    return -1


def _slow(data: bytes) -> Iterator[Any]:
    """Items of a JSON array's elements text (``{...}, {...}``), read by ijson."""
    import ijson

    yield from ijson.items(io.BytesIO(b"[" + data + b"]"), "item", use_float=True)


def fast_events(
    fh: IO[bytes], prefix: str, tail: list[bytes], threaded: bool, start: int | None = None
) -> Iterator[Any]:
    """The events of the open trace ``fh`` (``prefix`` as :func:`~tprimat.trace.reader.iter_events`).

    The bytes after the event array go to ``tail``.  Raises ValueError (or a
    decoding error) where the document is not what it should be: the caller
    then reads the whole trace again with ijson, for its exact events or error.
    ``start``: the events from this offset of a plain file on (the byte after an element's
    ``,``, see :func:`element_boundary`), to the end of the array.
    """
    kept = [b""]  # the document's last TAIL_BYTES, as the item-by-item reader keeps them

    def blocks_kept() -> Iterator[bytes]:
        for block in _blocks(fh, threaded):
            kept[0] = (kept[0] + block[-TAIL_BYTES:])[-TAIL_BYTES:]
            yield block

    if start is not None:
        fh.seek(start)
    blocks = blocks_kept()
    # `pending` always starts with "[": the complete events in it are decoded in place, the comma
    # after the last of them turned into "]" (no copy of the block).
    pending = bytearray(b"[") + (_skip_to_array(blocks, prefix) if start is None else bytearray())
    for block in blocks:
        pending += block
        cut = _last_boundary(pending)
        if not cut:
            continue
        yield from _take_events(pending, cut)
    # The last events, then the end of the array and what follows it.
    rest = bytes(pending[1:])
    end = _array_end(rest)
    if end is None:
        raise ValueError("the event array does not end (a truncated trace?)")
    if rest[:end].strip():
        try:
            yield from _BLOCK.decode(b"[" + rest[:end] + b"]")
        except (msgspec.ValidationError, msgspec.DecodeError):
            yield from _slow(rest[:end])
    for _ in blocks:
        pass  # nothing is left after the last block; this only closes the reader
    tail.append(kept[0])


def range_events(fh: IO[bytes], start: int, end: int) -> Iterator[Any]:
    """The events whose text is bytes ``start`` to ``end`` of the open plain trace ``fh``.

    ``start`` is the byte after the event array's ``[`` or after an element's ``,``; ``end``
    the byte after an event's closing ``}`` (see :func:`element_boundary`).  Raises like
    :func:`fast_events` where the bytes are not such events.
    """
    fh.seek(start)
    remaining = end - start
    pending = bytearray(b"[")
    while remaining > 0:
        block = fh.read(min(BLOCK_BYTES, remaining))
        if not block:
            raise ValueError("the trace ended inside a range of its events")
        remaining -= len(block)
        pending += block
        cut = _last_boundary(pending) if remaining else 0
        if cut:
            yield from _take_events(pending, cut)
    rest = bytes(pending[1:])
    if rest.strip():
        try:
            yield from _BLOCK.decode(b"[" + rest + b"]")
        except (msgspec.ValidationError, msgspec.DecodeError):
            yield from _slow(rest)


def array_start(fh: IO[bytes], prefix: str) -> int:
    """The offset of the byte after the ``[`` that opens the event array of the open plain trace ``fh``."""
    fh.seek(0)
    data = bytearray()
    while block := fh.read(BLOCK_BYTES):
        data += block
        start = _start_of_array(data, prefix)
        if start is not None:
            return start
        if len(data) > 64 * BLOCK_BYTES:
            break
    raise ValueError("no event array near the start")


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
    position = data.find(b"}")
    while position >= 0:
        comma = _comma_after(data, position)
        if comma >= 0:
            return offset + position + 1, offset + comma + 1
        position = data.find(b"}", position + 1)
    return None


def _take_events(pending: bytearray, cut: int) -> list[Any]:
    """The events in ``pending[1:cut]``, decoded in place; they are removed from ``pending``."""
    comma = pending.index(b",", cut)
    pending[comma] = 93  # "]"
    with memoryview(pending) as whole, whole[: comma + 1] as view:
        try:
            events = _BLOCK.decode(view)
        except (msgspec.ValidationError, msgspec.DecodeError):
            events = None
    if events is None:
        events = list(_slow(bytes(pending[1:cut])))
    pending[: comma + 1] = b"["
    return events


def _array_end(rest: bytes) -> int | None:
    """Offset of the ``]`` that closes the event array in ``rest`` (its last elements and more)."""
    stripped = rest.lstrip()
    if stripped.startswith(b"]"):
        return len(rest) - len(stripped)
    position = 0
    while True:
        position = rest.find(b"}", position)
        if position < 0:
            return None
        after = _skip_space(rest, position + 1)
        if after < len(rest) and rest[after] == 93:  # "]"
            try:
                msgspec.json.decode(b"[" + rest[: position + 1] + b"]")
            except msgspec.DecodeError:
                pass
            else:
                return after
        position += 1


def _skip_to_array(blocks: Iterator[bytes], prefix: str) -> bytearray:
    """The bytes after the ``[`` that opens the event array (more are read as needed)."""
    pending = bytearray()
    for block in blocks:
        pending += block
        start = _start_of_array(pending, prefix)
        if start is not None:
            del pending[:start]
            return pending
        if len(pending) > 64 * BLOCK_BYTES:
            break
    raise ValueError("no event array near the start")


def _start_of_array(data: bytes | bytearray, prefix: str) -> int | None:
    """Offset just after the ``[`` that opens the event array, once it is in ``data``."""
    if prefix == "item":
        stripped = len(data) - len(bytes(data).lstrip())
        if stripped < len(data):
            if data[stripped] != 91:  # "["
                raise ValueError("not an array")
            return stripped + 1
        return None
    match = _ARRAY_START.search(data)
    return match.end() if match else None


__all__ = ["BLOCK_BYTES", "Event", "array_start", "element_boundary", "fast_events", "range_events"]
