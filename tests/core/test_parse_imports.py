"""Log analysis runs on a laptop: nothing it imports pulls in torch or a plotting library."""

from __future__ import annotations

import subprocess
import sys


def test_parse_modules_import_without_heavy_libraries():
    code = (
        "import sys\n"
        "import tprimat.cli.parse, tprimat.parse.logs, tprimat.contract.logfile\n"
        "import tprimat.plugins.amd_primus.parse, tprimat.plugins.amd_megatron.parse\n"
        "import tprimat.plugins.nvd_megatron.parse, tprimat.plugins.nvd_nemo.parse\n"
        "heavy = ('torch', 'matplotlib', 'numpy', 'transformers')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
