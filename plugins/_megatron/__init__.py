"""Log reading shared by the Megatron-family backends (``amd_primus``, ``amd_megatron``, ``nvd_megatron``).

The Megatron iteration-line parser (``logparse``) and the log sniffers
(``sniff``), which each backend's ``parse.py`` and ``BackendSpec`` extend.
Not a plugin: it has no entry point and implements no hooks; the ``megatron``
plugin (:mod:`tprimat.plugins.megatron`) serves the backends.  Its modules
must stay importable without torch or any framework installed.
"""
