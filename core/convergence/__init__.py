"""Time to train: held-out validation data and the convergence summary (docs/convergence.md).

:mod:`tprimat.convergence.split` decides which documents of a prepared dataset are held
out for evaluation; :mod:`tprimat.convergence.summary` turns a run's evaluation records
into time-to-target and samples-to-target.  Neither imports torch.
"""
