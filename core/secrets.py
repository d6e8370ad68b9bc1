"""Keep secrets out of everything tprimat writes: logs, manifests, results, reports.

Tokens (``HF_TOKEN`` and friends) are read from the environment or from a
git-ignored ``.tprimat.env`` file, and every environment dump or command line
tprimat records passes through :func:`redact_env` / :func:`redact_text`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

REDACTED = "<redacted>"

#: Environment variable names whose values are secrets.
_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|CREDENTIAL)", re.I)
#: Token shapes that must never appear in output even outside an env dump.
_SECRET_VALUE = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16})\b")


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` with secret values replaced."""
    return {k: (REDACTED if is_secret_name(k) else redact_text(v)) for k, v in env.items()}


def redact_text(text: str) -> str:
    """``text`` with token-shaped substrings and values of secret env vars replaced."""
    text = _SECRET_VALUE.sub(REDACTED, text)
    for name, value in os.environ.items():
        if is_secret_name(name) and len(value) >= 8 and value in text:
            text = text.replace(value, REDACTED)
    return text


def load_env_file(path: str | Path = ".tprimat.env") -> dict[str, str]:
    """``KEY=VALUE`` lines from a git-ignored secrets file (missing file: empty)."""
    values: dict[str, str] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return values
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        values[key.strip().removeprefix("export ").strip()] = value.strip().strip("'\"")
    return values


def get_secret(name: str, env_file: str | Path = ".tprimat.env") -> str | None:
    """A secret from the environment, else from the env file; never logged."""
    return os.environ.get(name) or load_env_file(env_file).get(name)
