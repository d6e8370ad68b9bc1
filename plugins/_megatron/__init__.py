"""Code shared by the Megatron-family backends (``amd_primus``, ``amd_megatron``, ``nvd_megatron``).

Not a plugin: it has no entry point and implements no hooks.
"""
