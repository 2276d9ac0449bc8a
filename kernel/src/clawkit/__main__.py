"""``python -m clawkit``: the same as the ``clawkit`` command."""

import sys

from .cli import main

sys.exit(main())
