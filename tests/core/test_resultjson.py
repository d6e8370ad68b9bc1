"""Writing a result piece by piece gives exactly the text of the whole-document encoder."""

from __future__ import annotations

import json

import attrs
import pytest

from tests.plugins.logfixtures import LOGS
from tprimat.contract.registry import Registry
from tprimat.parse.logs import parse_logs
from tprimat.result.resultjson import iter_result_json
from tprimat.result.schema import dumps_result, load_result, write_result

PATHS = [
    LOGS / "megatron/mlm_2023-07-16_gpt345m_4TP_4xA800_fp16_full2000iter_excerpt.log",
    LOGS / "primus/primus_AMD-AGI-Primus_deepseek-v4_p21_smoke_pp2_ep4_MI355X_2026-05-07_excerpt.log",
    LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell22_crash_at_step17_injob_restart.log",
]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.parent.name)
def test_written_file_is_the_whole_document_text(path, tmp_path):
    result = parse_logs([path], registry=Registry.from_environment(), allow_mismatch=True).result
    nan = attrs.evolve(result.iterations[0], loss=float("nan"), reported={"x": float("inf")})
    for variant in (
        result,
        attrs.evolve(result, iterations=[nan, *result.iterations[1:]]),
        attrs.evolve(result, iterations=[]),
    ):
        out = write_result(variant, tmp_path / "result.json")
        text = out.read_text(encoding="utf-8")
        assert text == dumps_result(variant) == "".join(iter_result_json(variant))
        assert json.loads(text)["schema_version"] == load_result(out).schema_version
