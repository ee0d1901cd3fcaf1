"""`python -m graphopt` runs the command line.

Guarded, because `graphopt warmup`'s worker processes (multiprocessing's spawn) import the
parent's `__main__` module again, which must not start a second command line.
"""

from graphopt.cli import main

if __name__ == "__main__":
    main()
