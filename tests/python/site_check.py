"""What a program sees of the site setup: which sitecustomize module is registered, whether
the user's ran, whether vramledger's folder is left on sys.path, and whether torch's pool
functions are wrapped once torch is imported."""
import os
import sys

boot = os.environ.get("BOOT_DIR", "")
site = sys.modules.get("sitecustomize")
print("SITECUSTOMIZE %s" % (getattr(site, "__file__", None),))
print("USER_MARK %s" % os.environ.get("USER_SITECUSTOMIZE"))
print("USER_PATH %s" % ("/user-site-added-this" in sys.path))
print("BOOT_ON_PATH %s" % any(os.path.abspath(p or ".") == boot for p in sys.path))
import torch  # noqa: E402

print("WRAPPED %s" % getattr(torch._C._cuda_beginAllocateToPool, "_vramledger_wrapped", False))
