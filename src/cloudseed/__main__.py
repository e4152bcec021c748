"""``python -m cloudseed``: the ``cloudseed`` command."""

from cloudseed.cli import main

main()
