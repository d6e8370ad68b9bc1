"""The result: the versioned schema, the one builder, and every derived number (metrics, FLOPs, peaks)."""
