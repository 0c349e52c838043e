"""The typed failures a face may catch from the use-cases, each defined once in the room that raises it.

Every one derives from devctl.base.errors.DevctlError and carries its kind; a face decides on the class or the
kind, never on a message's words. They are named here so that no face imports node/ to catch one.
"""

from __future__ import annotations

from devctl.node.connect import RpcFailure
from devctl.node.files import FileReadError
from devctl.node.podresources import PodNotFound

__all__ = ["FileReadError", "PodNotFound", "RpcFailure"]
