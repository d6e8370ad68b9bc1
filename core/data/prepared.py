"""``dataset.json``: the description of a prepared dataset, and reading it back.

The file sits in the dataset directory (``data/<dataset>/<family>/``) next to
``tokenized/`` and ``tokenizer/``; paths in it are relative to that directory
so the directory can be copied between machines as a whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tprimat.errors import TprimatError

if TYPE_CHECKING:
    from tprimat.contract.plans import PreparedDataset
    from tprimat.settings.models import ModelSpec

DATASET_JSON = "dataset.json"
FORMAT = "tprimat-dataset"
FORMAT_VERSION = 1


class PreparedDatasetError(TprimatError):
    """A prepared dataset that is missing or whose ``dataset.json`` is invalid."""


def dataset_json_path(path: str | Path) -> Path:
    path = Path(path).expanduser()
    return path if path.suffix == ".json" else path / DATASET_JSON


def write_dataset_json(directory: Path, record: dict[str, Any]) -> Path:
    from tprimat.atomic import atomic_write_text

    body = {"format": FORMAT, "version": FORMAT_VERSION, **record}
    return atomic_write_text(directory / DATASET_JSON, json.dumps(body, indent=2) + "\n")


def read_dataset_json(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """``(json path, content)`` after checking the format and required keys."""
    json_path = dataset_json_path(path)
    if not json_path.is_file():
        if Path(path).expanduser().is_dir():
            raise PreparedDatasetError(
                f"{path} is not a prepared dataset: no {DATASET_JSON} (make one with `tprimat prepare-data`)"
            )
        raise PreparedDatasetError(f"prepared dataset {path} does not exist")
    try:
        data = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PreparedDatasetError(f"{json_path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PreparedDatasetError(f"{json_path}: not a tprimat dataset description")
    if data.get("version") != FORMAT_VERSION:
        raise PreparedDatasetError(
            f"{json_path}: dataset format version {data.get('version')!r}, this tprimat reads {FORMAT_VERSION}"
        )
    required = {
        "path_prefix": str,
        "tokenizer": str,
        "fingerprint": str,
        "documents": int,
        "tokens": int,
        "vocab_size": int,
    }
    for key, kind in required.items():
        value = data.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise PreparedDatasetError(f"{json_path}: {key!r} must be a {kind.__name__}, got {value!r}")
    if not data["fingerprint"].startswith("sha256:"):
        raise PreparedDatasetError(f"{json_path}: fingerprint is not a sha256 digest")
    return json_path, data


def load_prepared(path: str | Path) -> PreparedDataset:
    """The :class:`~tprimat.contract.plans.PreparedDataset` described by a dataset directory or its json."""
    from tprimat.contract.plans import PreparedDataset

    json_path, data = read_dataset_json(path)
    base = json_path.parent.resolve()
    prefix = (base / data["path_prefix"]).resolve()
    for suffix in (".bin", ".idx"):
        if not Path(f"{prefix}{suffix}").is_file():
            raise PreparedDatasetError(f"{json_path}: data file {prefix}{suffix} is missing")
    tokenizer = data["tokenizer"]
    local = base / tokenizer
    if local.is_dir():
        tokenizer = str(local.resolve())
    return PreparedDataset(
        path_prefix=prefix,
        tokenizer=tokenizer,
        fingerprint=data["fingerprint"],
        documents=data["documents"],
        tokens=data["tokens"],
        vocab_size=data["vocab_size"],
    )


def check_prepared(path: str | Path) -> dict[str, Any]:
    """Re-verify a prepared dataset and recompute its fingerprint from the files on disk.

    Runs every check of :func:`tprimat.data.verify.verify_dataset` (with the
    tokenizer copied next to the data) and raises :class:`PreparedDatasetError`
    when the recomputed fingerprint differs from the one in ``dataset.json``,
    naming the files whose digests changed.  Returns the recomputed inputs.
    """
    from tprimat.data.tokenizer import sha256_file
    from tprimat.data.verify import fingerprint_inputs, fingerprint_of, verify_dataset

    prepared = load_prepared(path)
    json_path, data = read_dataset_json(path)
    tokenizer_dir = Path(prepared.tokenizer)
    if not tokenizer_dir.is_dir():
        raise PreparedDatasetError(f"{json_path}: tokenizer directory {tokenizer_dir} is missing")
    recorded = data.get("fingerprint_inputs") or {}
    names = sorted(recorded.get("tokenizer_sha256") or {})
    missing = [n for n in names if not (tokenizer_dir / n).is_file()]
    if missing:
        raise PreparedDatasetError(f"{json_path}: tokenizer files missing: {', '.join(missing)}")
    hashes = {n: sha256_file(tokenizer_dir / n) for n in names}
    summary = verify_dataset(
        prepared.path_prefix,
        vocab_size=prepared.vocab_size,
        eos_id=data.get("eos_id") if isinstance(data.get("eos_id"), int) else None,
        documents=prepared.documents,
        tokens=prepared.tokens,
        decode=_decoder(tokenizer_dir),
    )
    inputs = fingerprint_inputs(
        prepared.path_prefix,
        hashes,
        documents=summary["documents"],
        tokens=summary["tokens"],
        dtype=summary["dtype"],
    )
    fingerprint = fingerprint_of(inputs)
    if fingerprint != prepared.fingerprint:
        changed = [
            key
            for key in ("bin_sha256", "idx_sha256", "dtype", "documents", "tokens")
            if recorded.get(key) != inputs[key]
        ]
        changed += [f"tokenizer/{n}" for n in names if recorded["tokenizer_sha256"].get(n) != hashes[n]]
        raise PreparedDatasetError(
            f"{json_path}: fingerprint mismatch: recorded {prepared.fingerprint}, files give "
            f"{fingerprint} (changed: {', '.join(changed) or 'fingerprint inputs'})"
        )
    return {"fingerprint": fingerprint, **inputs}


def _decoder(tokenizer_dir: Path) -> Callable[[list[int]], str] | None:
    """Token ids to text with the dataset's own tokenizer, special tokens kept; None without one."""
    if not (tokenizer_dir / "tokenizer.json").is_file():
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - the data extra brings tokenizers
        return None
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False)

    return decode


def check_model_compatibility(path: str | Path, model: str | ModelSpec) -> None:
    """Refuse to train ``model`` (a name or ``ModelSpec``) on a dataset made for another one.

    Two rules: the dataset was tokenized for the same model family (token ids of
    a Llama tokenizer mean nothing to a Qwen embedding, and the reverse), and its
    vocabulary fits in the model's embedding (every id is below ``vocab_size``,
    which the verify step checked).
    """
    from tprimat.settings.models import ModelSpec, UnknownModelError, get_model

    if not isinstance(model, ModelSpec):
        try:
            model = get_model(str(model))
        except UnknownModelError as exc:
            raise PreparedDatasetError(str(exc)) from None
    json_path, data = read_dataset_json(path)
    family = data.get("model_family")
    if family and family != model.family:
        raise PreparedDatasetError(
            f"{json_path}: tokenized for the {family} family "
            f"({data.get('tokenizer_source', 'unknown tokenizer')}), but {model.name} is a "
            f"{model.family} model; prepare the data for {model.name}"
        )
    if data["vocab_size"] > model.vocab_size:
        raise PreparedDatasetError(
            f"{json_path}: its tokenizer has {data['vocab_size']} tokens, more than the "
            f"{model.vocab_size} {model.name} embeds"
        )
