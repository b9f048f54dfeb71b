"""``python -m nyala`` runs the ``nyala`` command line."""

from nyala.tools.cli import main

main()
