"""The shareable file: a results directory zipped beside itself (DIR.zip holding DIR/...), so
one attachment carries the report, summary, gallery, answers and pelicans with their relative
links intact."""
import os
import zipfile
from pathlib import Path


def archive_directory(directory):
    directory = Path(directory).resolve()
    target = directory.with_name(directory.name + ".zip")
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(directory.rglob("*")):
            if path.is_file() and not path.name.endswith(".partial"):
                zf.write(path, f"{directory.name}/{path.relative_to(directory).as_posix()}")
    os.replace(partial, target)
    return target
