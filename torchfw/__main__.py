"""``python -m torchfw``: see :mod:`torchfw.cli`."""

from .cli import main

raise SystemExit(main())
