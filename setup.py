"""The compiled part of tprimat, optional: setup.cfg holds everything else.

``tprimat.plugins.megatron_core._offsets`` reads the figures of a dense training log's
lines in C.  It is optional: where it cannot be built (no C compiler), the install goes on
and the same figures are read by the Python reader it mirrors (see
``plugins/megatron_core/offsets.py``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tprimat.plugins.megatron_core._offsets",
            ["plugins/megatron_core/_offsets.c"],
            optional=True,
        )
    ]
)
