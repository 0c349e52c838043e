"""The typed failures a face may catch from the use-cases, each defined once in the room that raises it.

Every one derives from devctl.base.errors.DevctlError and carries its kind; a face decides on the class or the
kind, never on a message's words. They are named here so that no face imports node/ to catch one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devctl.base.errors import DevctlError, ErrorKind
from devctl.node.connect import RpcFailure
from devctl.node.files import FileReadError
from devctl.node.podresources import PodNotFound

if TYPE_CHECKING:
    from devctl.model import NodeSnapshot

__all__ = ["FileReadError", "NoSuchPod", "PodNotFound", "RpcFailure", "UnknownResource"]


class NoSuchPod(PodNotFound):
    """The node runs no pod of that name in that namespace (``devctl get``: exit 1), with what tells where a pod
    of that name does run: ``snapshot``, the node's List (its ``pods`` None when the List could not be read), or
    the ``--from`` snapshot searched."""

    def __init__(self, name: str, namespace: str, snapshot: NodeSnapshot):
        super().__init__(f"pod {name} in namespace {namespace} not found")
        self.name = name
        self.namespace = namespace
        self.snapshot = snapshot


class UnknownResource(DevctlError):
    """The node can be read and no plugin serves the named resource: the name is likely wrong (exit 1, as in ls)."""

    kind = ErrorKind.MISSING

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
