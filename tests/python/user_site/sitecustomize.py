"""A user's own sitecustomize: it must still run under vramledger's bootstrap."""
import os
import sys

os.environ["USER_SITECUSTOMIZE"] = "ran"
sys.path.append("/user-site-added-this")
