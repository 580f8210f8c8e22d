"""Exceptions that carry a message meant for the user (file, line or field named)."""


class LocalkgError(Exception):
    """Base of every error whose message is shown to the user as is."""


class InputError(LocalkgError):
    """Bad or unreadable input: names the file (and line or field where known)."""


class IndexError_(LocalkgError):
    """A missing, incomplete or incompatible index folder."""


class ModelError(LocalkgError):
    """A model that is missing, corrupt, or cannot be reached."""
