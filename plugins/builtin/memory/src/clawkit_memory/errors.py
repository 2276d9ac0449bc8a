"""The memory plugin's errors, apart from the modules that raise them (local and remote embedders)."""


class EmbeddingError(RuntimeError):
    """An embedding provider could not be set up or failed to embed."""
