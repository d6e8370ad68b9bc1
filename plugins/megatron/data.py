"""Prepared-dataset settings of the Megatron-family backends (``prepare_data``).

A dataset made by ``tprimat prepare-data`` is a Megatron ``.bin``/``.idx``
pair plus the Hugging Face tokenizer it was tokenized with.  Megatron sizes
the embedding from that tokenizer (``len(tokenizer)``) padded to a multiple
of ``--make-vocab-size-divisible-by`` × TP; :func:`vocab_divisor` picks the
multiple that makes the padded vocabulary equal the model's real one (e.g.
Qwen 2.5's 151,665-token tokenizer and 152,064-row embedding), so real-data
runs have the same FLOPs as mock-data runs.
"""

from __future__ import annotations

from typing import Any

from tprimat.contract import BenchmarkConfig, DataArguments, PreparedDataset, get_model
from tprimat.errors import TprimatError
from tprimat.plugins.megatron.settings import VOCAB_DIVISIBLE_BY
from tprimat.plugins.megatron_core.data import SPLIT, dataset_tokenizer, megatron_split


def vocab_divisor(tokenizer_vocab: int, model_vocab: int, tensor_parallel: int) -> int:
    """The smallest multiple of 128 padding ``tokenizer_vocab`` as a mock-data run pads the model.

    The target is ``model_vocab`` padded to 128 × TP, the embedding a mock-data
    run builds, so both kinds of run do the same work at any TP size.
    """
    if tokenizer_vocab > model_vocab:
        raise TprimatError(
            f"the dataset's tokenizer has {tokenizer_vocab} tokens, more than the model's "
            f"{model_vocab}-row embedding: it was prepared for another model"
        )
    multiple = VOCAB_DIVISIBLE_BY * tensor_parallel
    target = -(-model_vocab // multiple) * multiple
    divisor = VOCAB_DIVISIBLE_BY
    while divisor * tensor_parallel <= target:
        step = divisor * tensor_parallel
        if -(-tokenizer_vocab // step) * step == target:
            return divisor
        divisor += VOCAB_DIVISIBLE_BY
    raise TprimatError(
        f"no --make-vocab-size-divisible-by pads a {tokenizer_vocab}-token tokenizer to the "
        f"model's {target}-row padded embedding at tensor parallel size {tensor_parallel}"
    )


def data_settings(dataset: PreparedDataset, config: BenchmarkConfig) -> dict[str, Any]:
    """``data_path``, the split, and the dataset's own Hugging Face tokenizer, as Megatron destinations."""
    model = get_model(config.benchmark.model)
    return {
        "mock_data": False,
        "data_path": [str(dataset.path_prefix)],
        "split": megatron_split(config) or SPLIT,
        "train_data_path": None,
        "valid_data_path": None,
        "test_data_path": None,
        "tokenizer_type": "HuggingFaceTokenizer",
        "tokenizer_model": dataset_tokenizer(dataset, config),
        "vocab_size": None,
        "make_vocab_size_divisible_by": vocab_divisor(dataset.vocab_size, model.vocab_size, config.parallel.tensor),
    }


def data_arguments(dataset: PreparedDataset, config: BenchmarkConfig) -> DataArguments:
    """The ``prepare_data`` answer: the settings as ``overrides`` keyed by Megatron destinations.

    The launch renders them with the rest (flags for ``pretrain_gpt.py``, keys for Primus).
    """
    return DataArguments(overrides=data_settings(dataset, config))
