"""The autodiff engine's home (the engine moves here from ``rtx.autograd``)."""
