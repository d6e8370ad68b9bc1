"""``python -m tprimat.cli``: the same as the ``tprimat`` command."""

from tprimat.cli import main

main()
