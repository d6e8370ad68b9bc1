"""Prepared dataset → Megatron-LM ``--data-path`` and tokenizer arguments."""

from __future__ import annotations

from tprimat.contract.plans import DataArguments, PreparedDataset
from tprimat.plugins._megatron.data import megatron_data_args
from tprimat.settings.config import BenchmarkConfig


def data_arguments(dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments:
    return DataArguments(args=megatron_data_args(dataset, config))
