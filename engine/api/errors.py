"""The one line a person is shown for an exception that input or the machine caused (a bad
option, a missing or unreadable file, a damaged KG store), as the command line prints it;
None for an exception that is a bug and keeps its traceback."""

from __future__ import annotations

import re

from ingest.base.errors import LocalkgError

# The status names RocksDB puts in front of its errors (pyoxigraph raises them as RuntimeError
# or OSError): a damaged or unreadable KG store, never a bug of ours.
_STORE_ERROR = re.compile(r"(Corruption|IO error|Invalid argument|Not implemented|Operation aborted|Resource busy|"
                          r"Result incomplete|Try again|Timed out|Busy|Expired|NotFound|Shutdown in progress): ")

# (exception type, what goes before its file name), the first that matches wins
_FILE_ERRORS: tuple[tuple[type[OSError], str], ...] = (
    (FileNotFoundError, "file not found"),
    (IsADirectoryError, "expected a file, got a directory"),
    (PermissionError, "permission denied"),
    (FileExistsError, "expected a folder, a file is in the way"),
    (NotADirectoryError, "expected a folder, got a file"),
)


def user_error_message(exc: BaseException) -> str | None:
    """The message of a LocalkgError, a file error naming its file, or a KG store failure with
    the way to repair it; None when `exc` is none of these."""
    if isinstance(exc, LocalkgError):
        return str(exc)
    for kind, what in _FILE_ERRORS:
        if isinstance(exc, kind):
            return f"{what}: {exc.filename or exc}"
    if isinstance(exc, RuntimeError | OSError) and _STORE_ERROR.match(str(exc)):
        return (f"the KG store failed: {str(exc).strip().splitlines()[0]} (a damaged index: rebuild it "
                "with `python cli.py index --out INDEX --rebuild`)")
    return None
