"""``python -m simulator ...``: same as ``esper-warehouse simulate ...``."""

import sys

from esper_warehouse.simulator.cli import main

sys.exit(main(sys.argv[1:]))
