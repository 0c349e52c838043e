"""``devctl exporter``: one node's devices, holders and findings as Prometheus metrics.

A face beside ``cli``, ``tui`` and ``render``: it reads the node through
``collect``, ``analyze``, ``doctor`` and the live stream client of ``node``, and
nothing but ``devctl.cli.exporter`` imports it. ``live`` follows the plugin
streams, ``state`` holds the latest state and its rendered page, ``metrics``
turns that state into the contract's metric families, ``server`` runs it all.
"""
