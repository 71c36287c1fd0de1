"""The runner's two kinds of failure, mapped to the project's exit codes at the edge (main.py):
a usage error exits 2, anything else 1."""


class UsageError(Exception):
    """Bad flags or arguments: exit 2."""


class SuiteError(Exception):
    """A run that cannot go on (bad suite file, engine error, refused resume): exit 1."""
