"""What a run is: the benchmark config and its layers, methodologies and tuned presets, the model registry.

The lowest layer above the foundation modules (errors, atomic, secrets); it imports nothing else of tprimat.
"""
