"""The error of every log-reading tool (exit code 2): what file, what is wrong, what to do."""

from tprimat.errors import TprimatError


class ParseError(TprimatError):
    """Logs that cannot be turned into a result (none found, not recognised, no iterations, a mismatch)."""
