"""``python -m segment_balancer``: see :mod:`segment_balancer.tools.cli`."""

import sys

from segment_balancer.tools.cli import main

sys.exit(main())
