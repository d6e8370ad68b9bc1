"""Errors a user can act on.  The CLI prints them as one line and exits with code 2."""


class TprimatError(Exception):
    """An expected failure: bad input, a missing tool, an unusable file."""

    exit_code = 2
