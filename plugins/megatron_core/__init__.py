"""Code shared by the backends that train on Megatron core: Megatron-LM, Primus and NeMo 2.

Megatron-LM (``amd_megatron``, ``nvd_megatron``), Primus (``amd_primus``) and
NeMo 2 (``nvd_nemo``) all build their models with megatron-core and print its
log lines, so they share what this package holds, once:

* :mod:`~tprimat.plugins.megatron_core.lines`: the events a log parser yields and the
  readers of a log line's values (numbers, ``X/Y`` pairs, unit lists, labels, typed values);
* :mod:`~tprimat.plugins.megatron_core.stream`: :func:`~tprimat.plugins.megatron_core.stream.iter_events`,
  which streams a log through a line parser, reading only the lines that hold its triggers;
* :mod:`~tprimat.plugins.megatron_core.colour`: terminal colour codes stripped from log lines;
* :mod:`~tprimat.plugins.megatron_core.memory_lines`: the memory figures the logs print,
  read into per-rank peaks (each backend's ``memory_peaks``);
* :mod:`~tprimat.plugins.megatron_core.attention`: megatron-core's rule for the attention
  backend and the ``NVTE_*_ATTN`` environment, checked before a plan starts;
* :mod:`~tprimat.plugins.megatron_core.data`: the split weights and tokenizer a prepared
  dataset is read with;
* :mod:`~tprimat.plugins.megatron_core.tunables`: what ``tprimat tune`` may search.

This package is no plugin: it has no entry point, registers no backend and
implements no hook.  The ``megatron`` plugin (Megatron-LM, Primus) and the
``nvd_nemo`` plugin (NeMo 2) import it; neither imports the other's modules.
"""
