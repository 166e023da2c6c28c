"""``python -m deepgym``: the same as the ``deepgym`` command."""

from deepgym.cli import main

if __name__ == "__main__":
    main()
