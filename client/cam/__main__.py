"""`python -m client.cam ...`: `facefuse cam` without the server's command line (as tests run it)."""

import sys

from client.cam.cli import main

sys.exit(main())
