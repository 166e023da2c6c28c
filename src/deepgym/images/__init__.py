"""Container images: references, the registry client (the store and unpacker come beside them)."""
