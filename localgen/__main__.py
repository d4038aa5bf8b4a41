"""Allow `python -m localgen`."""

from localgen.launcher import main

main()
