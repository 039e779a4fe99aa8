"""``python -m heinfer.cli``: the ``heinfer`` command line without the console script
(layer: ``heinfer.cli``)."""

from heinfer.cli.app import main

if __name__ == "__main__":
    main()
