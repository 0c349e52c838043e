"""Files a person names on the command line (a plugin's config, a pod, a claims map): read as YAML or JSON.

Read through devctl.node.files (bounded, regular files only, never a FIFO or a device), parsed with
``yaml.safe_load``. A failure is one ``UserFileError``: its message says what went wrong with the path in it,
and ``problem`` is the parser's first line when the file was read but is not YAML, so each command can word it
as it always has.
"""

from __future__ import annotations

from typing import Any

from devctl.base.errors import DevctlError, ErrorKind


class UserFileError(DevctlError):
    def __init__(self, message: str, kind: ErrorKind, problem: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.problem = problem


def load_yaml(path: str) -> Any:
    """The YAML (or JSON) document in ``path``; raises UserFileError."""
    import yaml

    from devctl.node.files import FileReadError, read_file

    try:
        return yaml.safe_load(read_file(path))
    except FileReadError as e:
        raise UserFileError(str(e), e.kind) from None
    except yaml.YAMLError as e:
        raise UserFileError(f"{path}: not valid YAML", ErrorKind.MALFORMED, str(e).splitlines()[0]) from None
