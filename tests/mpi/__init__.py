"""Tests run under mpiexec (see conftest.py)."""
