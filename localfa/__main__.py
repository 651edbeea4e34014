"""`python -m localfa` is the `localfa` command."""

import sys

from localfa.cli import main

if __name__ == "__main__":
    sys.exit(main())
