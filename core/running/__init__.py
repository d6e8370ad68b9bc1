"""Running a benchmark: preparing a run, the dry run, supervising processes, the runner, the monitor,
manifests, SLURM and the system profilers.
"""
