"""Readable Python definitions of what the native core computes (see cdc/native.py)."""
