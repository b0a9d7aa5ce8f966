"""The classic Ascend GE binary OM (v1) file: a 256-byte header, partition tables, partitions.

`layout` is the single source of truth for the byte layout; `container` writes and reads it.
"""
