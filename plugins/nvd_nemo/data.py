"""Prepared dataset → NeMo ``PreTrainingDataModule`` paths and tokenizer."""

from __future__ import annotations

from tprimat.contract import BenchmarkConfig, get_model
from tprimat.contract.plans import DataArguments, PreparedDataset
from tprimat.plugins.megatron_core.data import SPLIT, dataset_tokenizer, megatron_split


def data_arguments(dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments:
    model = get_model(config.benchmark.model)
    if dataset.vocab_size > model.vocab_size:
        from tprimat.errors import TprimatError

        raise TprimatError(
            f"the dataset's tokenizer has {dataset.vocab_size} tokens, more than the model's "
            f"{model.vocab_size}-row embedding: it was prepared for another model"
        )
    return DataArguments(
        overrides={
            "data": {
                "paths": [str(dataset.path_prefix)],
                "tokenizer": dataset_tokenizer(dataset, config),
                "split": megatron_split(config) or SPLIT,
            }
        }
    )
