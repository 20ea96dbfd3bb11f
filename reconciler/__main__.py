"""``python -m reconciler`` is ``optk``."""

import sys

from reconciler._commands.cli import main

sys.exit(main())
