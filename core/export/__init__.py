"""Write results to experiment trackers (MLflow, Weights & Biases, TensorBoard, or a plugin's own).

:mod:`~tprimat.export.layout` lays a result out once for every tracker;
:mod:`~tprimat.export.deliver` finds the exporter a user names and hands it the
runs (``tprimat export``, ``--report-to``).  The exporters themselves are
plugins: tprimat's own are ``tprimat.plugins.exporters``, registered through the
``register_exporters`` hook like a third party's.  See ``docs/export.md``.
"""
