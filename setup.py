"""The compiled part of tprimat, optional: setup.cfg holds everything else.

``tprimat.plugins.megatron_core._lines`` reads the lines of a dense training log in C.  It
is optional: where it cannot be built (no C compiler), the install goes on and the same
records are read by the Python readers it stands for (see
``plugins/megatron_core/compiled.py``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tprimat.plugins.megatron_core._lines",
            ["plugins/megatron_core/_lines.c"],
            optional=True,
        )
    ]
)
