"""What a packager reads: the license, the metadata, and extras that pull exactly what their code imports."""

from __future__ import annotations

import ast
import configparser
import re
import sys
from pathlib import Path

import pytest

from tprimat.contract.version import CONTRACT_VERSION

ROOT = Path(__file__).resolve().parents[1]
SETUP = configparser.ConfigParser(interpolation=None)
SETUP.read(ROOT / "setup.cfg")

#: Import name -> the distribution that provides it, for the third parties tprimat imports.
DISTRIBUTIONS = {
    "numpy": "numpy",
    "tokenizers": "tokenizers",
    "huggingface_hub": "huggingface_hub",
    "datasets": "datasets",
    "pyarrow": "pyarrow",
    "torch": "torch",
    "transformers": "transformers",
    "megatron": "megatron-core",
    "matplotlib": "matplotlib",
    "mlperf_logging": "mlperf-logging",
    "pynvml": "nvidia-ml-py",
    "yaml": "pyyaml",
    "tomli_w": "tomli-w",
}
#: Each extra and the code that needs it (the code's other imports are tprimat's own requirements).
EXTRAS_CODE = {
    "data": ["core/data/*.py"],
    "megatron": ["plugins/megatron/corecheck.py"],
    "ml": ["plugins/torch/*.py"],
    "mlperf": ["core/mlperf/*.py"],
    "plot": ["core/compare/plots.py"],
    "gpu": ["core/running/monitor.py"],
}
#: Imported where the library exists but deliberately in no extra (docs/run.md, "GPU monitor").
NOT_IN_AN_EXTRA = {"amdsmi"}  # must match the ROCm installed; ROCm ships it


def _requirements(text: str) -> set[str]:
    lines = [line.split("#")[0].strip() for line in text.splitlines()]
    return {re.split(r"[<>=!~;\[ ]", line)[0] for line in lines if line}


def _imports(patterns: list[str]) -> set[str]:
    found = set()
    for pattern in patterns:
        for path in ROOT.glob(pattern):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name != "tprimat"}


def test_the_license_file_is_the_apache_2_0_text_the_metadata_names():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 170  # the full text
    metadata = SETUP["metadata"]
    assert metadata["license"] == "Apache-2.0" and metadata["license_files"].strip() == "LICENSE"
    assert "License :: OSI Approved :: Apache Software License" in metadata["classifiers"]


def test_classifiers_name_the_python_versions_the_package_supports():
    classifiers = [c.strip() for c in SETUP["metadata"]["classifiers"].splitlines() if c.strip()]
    lowest = int(SETUP["options"]["python_requires"].split(">=3.")[1])
    versions = sorted(int(c.rsplit(".", 1)[1]) for c in classifiers if re.fullmatch(r".*Python :: 3\.\d+", c))
    assert versions and versions[0] == lowest  # only versions CI runs are claimed
    assert "Typing :: Typed" in classifiers  # py.typed ships (package_data)


def test_the_plugin_contract_version_is_in_the_metadata():
    group = SETUP["options.entry_points"]["tprimat_contract"]
    names = [line.split("=")[0].strip() for line in group.splitlines() if line.strip()]
    assert names == [CONTRACT_VERSION]


@pytest.mark.parametrize("extra", sorted(EXTRAS_CODE))
def test_an_extra_pulls_exactly_what_its_code_imports(extra):
    core = _requirements(SETUP["options"]["install_requires"])
    wanted = _requirements(SETUP["options.extras_require"][extra])
    imported = _imports(EXTRAS_CODE[extra]) - NOT_IN_AN_EXTRA
    needed = {DISTRIBUTIONS.get(name, name) for name in imported} - core
    assert needed == wanted


def test_tomli_w_and_jsonschema_are_where_their_users_are():
    assert "tomli-w" in _requirements(SETUP["options"]["install_requires"])  # every config write
    assert "jsonschema" in _requirements(SETUP["options.extras_require"]["test"])  # only tests validate
