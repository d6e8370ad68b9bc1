"""A plugin whose import fails, as when a plugin needs a package that is not installed."""

import tprimat_dependency_that_is_not_installed  # noqa: F401
