"""``python -m kshim`` runs the command line."""

import sys

from kshim.launcher import main

sys.exit(main())
