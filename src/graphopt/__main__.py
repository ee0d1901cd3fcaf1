"""`python -m graphopt` runs the command line."""

from graphopt.cli import main

main()
