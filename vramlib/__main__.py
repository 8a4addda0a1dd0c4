"""``python -m vramlib``: the command line (see :mod:`vramlib.workshop.cli`)."""
from .workshop.cli import main

raise SystemExit(main())
