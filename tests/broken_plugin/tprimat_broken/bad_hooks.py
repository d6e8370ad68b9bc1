"""A plugin whose hook implementation does not match the spec (an unknown argument)."""

import tprimat


@tprimat.hookimpl
def launch(backend, context, not_an_argument_of_the_spec):
    return None
