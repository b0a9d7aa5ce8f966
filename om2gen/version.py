"""Versions om2gen writes into archives and checks when loading them."""
__version__ = "0.1.0"

GENERATOR = f"om2gen {__version__}"
# The C ABI of model libraries (runtime_abi/include/om2/om2_model_api.h OM2_MODEL_ABI_VERSION).
MODEL_ABI_VERSION = 2
# The kernel ABI (runtime_abi/include/om2/om2_kernel.h OM2_KERNEL_ABI_VERSION).
KERNEL_ABI_VERSION = 1
# The entry points of a dynamic model's kAutofuse libraries (runtime_abi/include/om2/om2_autofuse.h
# OM2_AUTOFUSE_ABI_VERSION).
AUTOFUSE_ABI_VERSION = 1
