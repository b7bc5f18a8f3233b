"""``python -m benchmarks <subcommand>`` (from the repository root)."""

import sys

from .run import main

sys.exit(main())
