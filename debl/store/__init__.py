"""Link stores: one interface (``LinkStore``), three implementations (memory, MySQL, HBase)."""
from debl.store.base import LinkStore

__all__ = ["LinkStore"]
