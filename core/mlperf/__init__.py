"""MLPerf Training logs: writing them from a run, reading published ones (docs/convergence.md).

:mod:`tprimat.mlperf.writer` writes ``:::MLLOG`` lines with the ``mlperf-logging``
package (the ``mlperf`` extra); :mod:`tprimat.mlperf.reader` reads result files
(plain JSON lines, no extra needed) into time-to-train, status and
hyper-parameters, and scores several runs by MLPerf's olympic rule;
:mod:`tprimat.mlperf.layout` tells the runs of a published result folder from the
files beside them (``scaling.json``, power readings) and :mod:`tprimat.mlperf.summary`
scores each system, scaled as MLPerf publishes it.
"""
