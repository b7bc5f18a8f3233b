"""Op rules (forward + backward), one module per op family."""
