"""Profiler-trace analysis: where GPU time goes on each rank, and why two platforms differ.

* :mod:`tprimat.trace.reader` streams Kineto Chrome-trace JSON (plain or gzip)
  into compact arrays, without loading the document, under the bounds of
  :mod:`tprimat.trace.limits` (every trace is untrusted input);
* :mod:`tprimat.trace.categories` is the kernel-name table (NVIDIA and AMD);
* :mod:`tprimat.trace.analyze` computes the temporal breakdown, categories,
  exposed communication, top kernels and launch counts per rank and step;
* :mod:`tprimat.trace.compare` attributes the step-time difference of two
  trace sets to categories (:func:`tprimat.trace.compare.compare_traces`) and,
  through :mod:`tprimat.trace.opgap`, to operators;
* :mod:`tprimat.trace.opread` reads the CPU operators and which one launched each
  kernel, :mod:`tprimat.trace.opcost` their FLOPs and bytes from recorded shapes,
  :mod:`tprimat.trace.roofline` how far each is from the device's roofline.

Nothing here imports numpy, pandas or matplotlib at import time.
"""

from __future__ import annotations

from tprimat.trace.reader import TraceFormatError

__all__ = ["TraceFormatError"]
