"""What a machine is: platform and device detection from the vendors' tools, without importing torch."""
