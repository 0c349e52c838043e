"""``devctl tui`` and ``devctl demo``: the node's devices at a glance, live (textual).

Imported only by those two commands: ``devctl --help`` and the read commands never load textual.
"""
