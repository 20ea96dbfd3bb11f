"""``python -m reconciler`` is ``optk``."""

import sys

from reconciler._cli import main

sys.exit(main())
