"""The `vramledger` console script: runs the packaged CLI in this process's place (same pid,
signals, exit code), with the packaged libvramledger.so beside it."""

import os
import sys

from ._paths import cli_path


def main():
    cli = cli_path()
    os.execv(cli, [cli, *sys.argv[1:]])


if __name__ == "__main__":
    main()
