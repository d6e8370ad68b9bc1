"""tprimat's built-in backends, each a plugin registered through the ``tprimat`` entry-point group.

They are loaded exactly like third-party plugins: see ``docs/plugins.md``.
"""
