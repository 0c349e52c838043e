"""The typed failures a face may catch from the use-cases, each defined once in the room that raises it.

Every one derives from devctl.base.errors.DevctlError and carries its kind; a face decides on the class or the
kind, never on a message's words. They are named here so that no face imports node/ to catch one.
"""

from __future__ import annotations

from devctl.base.errors import DevctlError, ErrorKind
from devctl.node.connect import RpcFailure
from devctl.node.files import FileReadError
from devctl.node.podresources import PodNotFound

__all__ = ["FileReadError", "PodNotFound", "RpcFailure", "UnknownResource"]


class UnknownResource(DevctlError):
    """The node can be read and no plugin serves the named resource: the name is likely wrong (exit 1, as in ls)."""

    kind = ErrorKind.MISSING

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
