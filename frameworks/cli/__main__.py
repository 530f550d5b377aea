"""`python -m frameworks.cli`: the `agora` command where the console script is not on PATH."""

from frameworks.cli.main import main

main()
