"""What a prepared dataset asks of every backend that reads it with Megatron core's loader.

Megatron-LM, Primus and NeMo 2 read a ``tprimat prepare-data`` dataset (a
Megatron ``.bin``/``.idx`` pair) through megatron-core's dataset builder: the
same ``train,valid,test`` split weights and the dataset's own tokenizer.
"""

from __future__ import annotations

from tprimat.contract import BenchmarkConfig, PreparedDataset

#: Throughput runs: every token trains, nothing is held out (convergence runs: megatron_split).
SPLIT = "100,0,0"


def megatron_split(config: BenchmarkConfig) -> str | None:
    """Megatron's ``train,valid,test`` weights holding out ``convergence.validation_fraction``.

    Megatron-LM and NeMo split by contiguous document ranges, not by tprimat's seeded
    document choice (:mod:`tprimat.convergence.split`): their held-out documents differ from
    the torch backend's.  None for throughput runs (nothing is held out).
    """
    if not config.convergence.enabled:
        return None
    held_out = config.convergence.validation_fraction
    return f"{1 - held_out:g},{held_out:g},0"


def dataset_tokenizer(dataset: PreparedDataset, config: BenchmarkConfig) -> str:
    """The tokenizer to train with: the config's, else the one the dataset was tokenized with."""
    return config.data.tokenizer or dataset.tokenizer
