"""``python -m kshim`` runs the command line."""

import sys

from kshim.cli.main import main

sys.exit(main())
