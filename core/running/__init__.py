"""Running a benchmark: preparing a run, the dry run, supervising processes, the runner, the monitor,
manifests, SLURM (on the hosts or in container images), Kubernetes and the system profilers.
"""
