import sys

from warpcode.agent.cli import main

sys.exit(main())
