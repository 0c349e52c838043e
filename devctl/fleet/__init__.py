"""``devctl fleet``: the node views across many nodes, from Prometheus.

A face beside ``cli``: it asks Prometheus' HTTP API (``prometheus``) for the
series every node's ``devctl exporter`` gives it and joins them by node
(``views``); it never reads a node itself and keeps no data of its own.
"""
