"""Placeholders for everything local in what a report records: the binary, model, --root and
suite arguments become <binary>, <model>, <root> and <suite>; the store, the index's data
directory and the results directory <store>, <data> and <output>; the home directory ~ and the
hostname <host>. Generated answers and --note text are kept verbatim (seed "Sharing a run")."""
import os
import socket


class Scrubber:
    def __init__(self):
        self._pairs = []  # (text, placeholder), longest first when applied

    def add(self, value, placeholder, path=True):
        if not value:
            return
        values = {str(value)}
        if path:
            values.add(os.path.realpath(str(value)))
            values.add(os.path.abspath(str(value)))
        for v in values:
            if len(v) >= 2 and v not in ("/", "."):
                self._pairs.append((v, placeholder))

    def add_defaults(self):
        home = os.path.expanduser("~")
        if home and home != "/":
            self.add(home, "~")
        try:
            host = socket.gethostname()
        except OSError:
            host = ""
        if len(host) >= 3:
            self.add(host, "<host>", path=False)
            short = host.split(".")[0]
            if len(short) >= 3:
                self.add(short, "<host>", path=False)

    def text(self, value):
        if not isinstance(value, str):
            return value
        for needle, placeholder in sorted(self._pairs, key=lambda p: -len(p[0])):
            value = value.replace(needle, placeholder)
        return value

    def json(self, value):
        """A copy of a JSON value with every string scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.json(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self.json(v) for k, v in value.items()}
        return value
