"""``python -m simulator ...``: same as ``esper-warehouse simulate ...``."""

import sys

from simulator.cli import main

sys.exit(main(sys.argv[1:]))
