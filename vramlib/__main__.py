"""``python -m vramlib``: the command line (see :mod:`vramlib.cli`)."""
from .cli import main

raise SystemExit(main())
