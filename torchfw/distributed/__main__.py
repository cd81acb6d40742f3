"""``python -m torchfw.distributed`` (under ``torchrun``): runs :mod:`torchfw.distributed.cli`."""

from .cli import main

if __name__ == "__main__":  # pragma: no cover - exercised through torchrun
    raise SystemExit(main())
