"""Allow `python -m localgen`."""

from localgen.cli import main

main()
