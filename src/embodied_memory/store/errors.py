class StoreError(RuntimeError):
    """The store cannot do what was asked (bad arguments, unavailable backend)."""


class InvalidRecordError(StoreError, ValueError):
    """A record was rejected before anything was written; nothing stored changed."""


class UnknownPersonError(StoreError, KeyError):
    """No identity with that id (or display name) is stored."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else "unknown person"
