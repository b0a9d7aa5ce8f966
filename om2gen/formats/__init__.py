"""The two model file formats om2gen writes and reads: OM2 archives (formats/om2/) and classic
GE .om files (formats/om/), told apart by their first four bytes."""

OM2_MAGIC = b"PK\x03\x04"   # an OM2 archive is a ZIP (GE's OM2_MAGIC)
OM_MAGIC = b"IMOD"          # a classic OM file (GE's MODEL_FILE_MAGIC_NUM 0x444F4D49, little-endian)
