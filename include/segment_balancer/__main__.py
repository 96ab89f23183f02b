"""``python -m segment_balancer``: see :mod:`segment_balancer.cli`."""

import sys

from .cli import main

sys.exit(main())
