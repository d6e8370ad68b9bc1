"""The NeMo fixture logs the NeMo tests read (provenance in tests/fixtures/logs/PROVENANCE.md)."""

from __future__ import annotations

from tests.plugins.logfixtures import LOGS

# NeMo 1 code path (NGC nemo:25.04), console logs with DLLogger's stdout records
LLAMA8B = LOGS / "nemo/nemo1_2025-06-12_gpu-recipes_llama3-8b_8xB200_fp8_nemo25.04_dll-stdout_full.log"
LLAMA70B = LOGS / "nemo/nemo1_2025-06-11_gpu-recipes_llama3-70b_64xB200_fp8_nemo25.04_pod0_cr-redraws_full.log"
QWEN = LOGS / "nemo/nemo1_2025-06-20_gpu-recipes_qwen3-30b-moe_16xB200_fp8_nemo25.04_tflops-failed_full.log"
# DLLogger JSON streams: NeMo's, and another program's
GPT175B = LOGS / "dllogger/nemo_2024-09-28_gpu-recipes_gpt3-175b_256xH100_nemo24.07_dllogger_full.json"
RESNET = LOGS / "dllogger/dllogger_example_resnet_log_first10_excerpt.json"
# NeMo 2
DIT = LOGS / "nemo/nemo2_2024-11-14_dit-train-mock_2gpu_nemo-run-resolved-arguments_readme_excerpt.log"
E5 = LOGS / "nemo/nemo2_2025-08-26_e5-finetune_1gpu_starting-with-1-processes_cell16.log"
CELL14 = LOGS / "nemo/nemo2_2025-03-07_resiliency_demo_llama54M_8gpu_cell14_normal_run.log"
AWS = LOGS / "nemo/nemo2_2025-08_NeMo-AWS-PERF_README_TFLOPS_per_GPU_3iter_doc_excerpt.log"
