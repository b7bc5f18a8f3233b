"""The autodiff engine (moving here from ``rtx.autograd``; see issue 10)."""
