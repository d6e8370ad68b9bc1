"""Prepared dataset → NeMo ``PreTrainingDataModule`` paths and tokenizer."""

from __future__ import annotations

from tprimat.config import BenchmarkConfig
from tprimat.models import get_model
from tprimat.plans import DataArguments, PreparedDataset
from tprimat.plugins._megatron.data import SPLIT, dataset_tokenizer


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
                "split": convergence_split(config) or SPLIT,
            }
        }
    )


def convergence_split(config: BenchmarkConfig) -> str | None:
    """Megatron's ``train,valid,test`` weights holding out ``convergence.validation_fraction``.

    Megatron splits by contiguous document ranges, not by tprimat's seeded document
    choice (:mod:`tprimat.convergence.split`): the held-out documents differ from the
    torch backend's, so compare time to target across these backends with care.
    """
    if not config.convergence.enabled:
        return None
    held_out = config.convergence.validation_fraction
    return f"{1 - held_out:g},{held_out:g},0"
