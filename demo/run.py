"""`make demo`: shows what Nyala can do so far; it grows into the Spark pipeline demo."""

from __future__ import annotations

import argparse

from nyala._version import __version__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default="./nyala-data", help="where the demo keeps its data")
    args = parser.parse_args()
    print(f"nyala {__version__}: data directory {args.dir}")


if __name__ == "__main__":
    main()
