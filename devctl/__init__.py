"""devctl: a node-local Kubernetes device inspector."""

__version__ = "0.1.0"
