"""Document filters, applied in a fixed order, each counting what it dropped.

1. Unicode normalisation (``NFC`` by default, ``NFKC``, or ``none``) and removal of
   leading/trailing whitespace.
2. ``empty``: nothing left after stripping.
3. ``min_chars``: fewer characters than the threshold.
4. ``min_words``: fewer whitespace-separated words than the threshold.
5. ``duplicate``: a document whose normalised text was already kept (exact
   duplicates, compared by a 16-byte BLAKE2b digest).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import attrs

UnicodeForm = Literal["NFC", "NFKC", "NFD", "NFKD"]
#: ``--normalize`` values that name a Unicode normal form (the other one is ``none``).
_FORMS: dict[str, UnicodeForm] = {"NFC": "NFC", "NFKC": "NFKC", "NFD": "NFD", "NFKD": "NFKD"}
NORMALIZATIONS = (*_FORMS, "none")


@attrs.frozen(kw_only=True)
class CleanOptions:
    normalize: str = attrs.field(default="NFC")
    min_chars: int = 1
    min_words: int = 1
    dedup: bool = True

    @normalize.validator
    def _check(self, _attribute: attrs.Attribute[str], value: str) -> None:
        if value not in NORMALIZATIONS:
            raise ValueError(f"normalize must be one of {', '.join(NORMALIZATIONS)}, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class CleanStats:
    """Documents read, kept, and dropped per filter."""

    read: int = 0
    kept: int = 0
    dropped: dict[str, int] = attrs.Factory(lambda: {"empty": 0, "min_chars": 0, "min_words": 0, "duplicate": 0})
    characters_kept: int = 0

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def clean_documents(documents: Iterable[str], options: CleanOptions, stats: CleanStats) -> Iterator[str]:
    """Yield the documents that pass every filter, counting drops into ``stats``."""
    seen: set[bytes] = set()
    form = _FORMS.get(options.normalize)  # None for "none"
    for text in documents:
        stats.read += 1
        if form is not None:
            text = unicodedata.normalize(form, text)
        text = text.strip()
        if not text:
            stats.dropped["empty"] += 1
            continue
        if len(text) < options.min_chars:
            stats.dropped["min_chars"] += 1
            continue
        if options.min_words > 1 and len(text.split(None, options.min_words)) < options.min_words:
            stats.dropped["min_words"] += 1
            continue
        if options.dedup:
            digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
            if digest in seen:
                stats.dropped["duplicate"] += 1
                continue
            seen.add(digest)
        stats.kept += 1
        stats.characters_kept += len(text)
        yield text
