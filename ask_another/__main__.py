"""`python -m ask_another` is the `ask-another` console script."""

import sys

from ask_another.cli import main

sys.exit(main())
