"""The compiled part of tprimat, optional: setup.cfg holds everything else.

Two small C modules, each standing for Python code that does the same where it is not built:
``tprimat.plugins.megatron_core._lines`` reads the lines of a dense training log (see
``plugins/megatron_core/compiled.py``), ``tprimat.result._exact`` sums a long column of floats
exactly for its standard deviation (see ``core/result/metrics.py``).  Both are optional: where
they cannot be built (no C compiler), the install goes on and tprimat gives the same results
in Python.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tprimat.plugins.megatron_core._lines",
            ["plugins/megatron_core/_lines.c"],
            optional=True,
        ),
        Extension("tprimat.result._exact", ["core/result/_exact.c"], optional=True),
    ]
)
