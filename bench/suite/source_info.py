"""The source the runner and the binary were built from, when the repository is a git checkout:
commit, whether the work tree differs from it, and a hash of that difference (the diff itself
names only repository-relative paths, but can be long, so the report keeps its hash and stat)."""
import hashlib
import subprocess


def _git(repo, *args):
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def source_info(repo):
    commit = _git(repo, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None}
    diff = _git(repo, "diff", "HEAD", "--", "src", "CMakeLists.txt", "cmake") or ""
    stat = _git(repo, "diff", "HEAD", "--shortstat", "--", "src", "CMakeLists.txt", "cmake") or ""
    return {"commit": commit.strip(), "source_dirty": bool(diff),
            "source_diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None,
            "source_diff_stat": stat.strip() or None}
