"""Runnable examples shipped inside the package (``python -m rtx.examples.<name>``)."""
