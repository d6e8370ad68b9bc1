"""Prepared dataset → Primus experiment overrides (``mock_data: false``, ``train_data_path``)."""

from __future__ import annotations

from tprimat.contract.plans import DataArguments, PreparedDataset
from tprimat.plugins._megatron.data import dataset_tokenizer, vocab_divisor
from tprimat.settings.config import BenchmarkConfig
from tprimat.settings.models import get_model


def data_arguments(dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments:
    model = get_model(config.benchmark.model)
    return DataArguments(
        overrides={
            "mock_data": False,
            "train_data_path": str(dataset.path_prefix),
            "valid_data_path": None,
            "test_data_path": None,
            "tokenizer_type": "HuggingFaceTokenizer",
            "tokenizer_model": dataset_tokenizer(dataset, config),
            "vocab_size": None,
            "make_vocab_size_divisible_by": vocab_divisor(
                dataset.vocab_size, model.vocab_size, config.parallel.tensor
            ),
        }
    )
