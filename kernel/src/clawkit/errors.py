"""Exceptions the CLI maps to exit codes, kept import-light so start-up stays fast."""


class ConfigError(Exception):
    """Bad agent configuration; the message names file, line and field."""


class ProviderError(Exception):
    """A model call failed for good (retries exhausted, bad credentials, …).

    ``retryable`` says whether the failure was transient; ``context_overflow`` that the
    request was larger than the model's window (compaction may help).
    """

    def __init__(self, message: str, *, retryable: bool = False, context_overflow: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.context_overflow = context_overflow
        self.status = status


class UsageError(Exception):
    """Bad input on the command line (exit code 2)."""
