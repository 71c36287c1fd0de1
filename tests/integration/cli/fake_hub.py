"""A local stand-in for the Hugging Face Hub endpoints the client uses (docs/formats.md
§5.3-5.5), on 127.0.0.1 only: revision resolution with the file list, file resolution with Range,
redirects to a separate "CDN" server, auth-required and gated repositories (401/403 with
X-Error-Code), 404s, a mode that ignores Range, a mode that cuts transfers short once per file
(to exercise resume) and a slow mode (to kill clients mid-download)."""
import hashlib
import http.server
import json
import re
import threading
import time
import urllib.parse
from pathlib import Path

APPROVED_TOKEN = "hf_approved_secret_token_123"
UNAPPROVED_TOKEN = "hf_unapproved_secret_token_456"


def commit_for(name):
    return hashlib.sha1(name.encode()).hexdigest()


class Repo:
    def __init__(self, directory, access="public"):
        self.commits = {}  # commit -> {path: bytes}
        self.refs = {}     # branch / tag -> commit
        self.access = access  # public | token (private) | gated

    def add_commit(self, commit, files, *refs):
        self.commits[commit] = files
        for ref in refs:
            self.refs[ref] = commit

    def resolve(self, revision):
        if revision in self.refs:
            return self.refs[revision]
        if revision in self.commits:
            return revision
        return None


def read_tree(directory):
    return {p.name: p.read_bytes() for p in sorted(Path(directory).iterdir()) if p.is_file()}


class HubState:
    """Everything the handlers share; tests flip the modes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.repos = {}
        self.reset()

    def reset(self):
        with self.lock:
            self.ignore_range = False
            self.redirect = False      # resolve answers 302 to the CDN server
            self.cut_once = False      # each file's first full transfer stops halfway
            self.cut_done = set()
            self.delay_per_chunk = 0.0
            self.requests = []         # (method, path, range, authorization)
            self.weight_bytes_sent = 0

    def log(self, handler):
        with self.lock:
            self.requests.append((handler.command, handler.path, handler.headers.get("Range"),
                                  handler.headers.get("Authorization")))


class HubHandler(http.server.BaseHTTPRequestHandler):
    state = None
    cdn_base = None

    def log_message(self, *args):
        pass

    def error(self, status, code=None, message=None):
        body = json.dumps({"error": message or code or str(status)}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        if message:
            self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def check_access(self, repo):
        auth = self.headers.get("Authorization")
        if repo.access == "public":
            return True
        if repo.access == "token":
            if auth is None:
                self.error(401, "RepoNotFound", "Repository not found")
                return False
            if auth != f"Bearer {APPROVED_TOKEN}":
                self.error(401, None, "Invalid credentials in Authorization header")
                return False
            return True
        if auth is None:
            self.error(401, "GatedRepo", "Access to model is restricted, you must be authenticated")
            return False
        if auth != f"Bearer {APPROVED_TOKEN}":
            self.error(403, "GatedRepo", "Access to model is restricted and you are not in the authorized list")
            return False
        return True

    def do_GET(self):
        self.state.log(self)
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.split("/")
        if url.path.startswith("/api/models/"):
            return self.api(parts)
        if len(parts) >= 6 and parts[3] == "resolve":
            return self.resolve(parts)
        self.error(404)

    def find_repo(self, owner, name):
        repo = self.state.repos.get(f"{owner}/{name}")
        if repo is None:
            self.error(401 if self.headers.get("Authorization") is None else 404, "RepoNotFound",
                       "Repository not found")
        return repo

    def api(self, parts):
        # /api/models/{owner}/{name}/revision/{rev}
        if len(parts) != 7 or parts[5] != "revision":
            return self.error(404)
        repo = self.find_repo(parts[3], parts[4])
        if repo is None:
            return
        # Metadata of gated repositories is public; private ones need the token.
        if repo.access == "token" and not self.check_access(repo):
            return
        revision = urllib.parse.unquote(parts[6])
        commit = repo.resolve(revision)
        if commit is None:
            return self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        files = repo.commits[commit]
        body = json.dumps({
            "id": f"{parts[3]}/{parts[4]}", "sha": commit, "private": repo.access == "token",
            "gated": "manual" if repo.access == "gated" else False,
            "siblings": [{"rfilename": path, "size": len(data)} for path, data in files.items()],
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def resolve(self, parts):
        # /{owner}/{name}/resolve/{rev}/{path...}
        repo = self.find_repo(parts[1], parts[2])
        if repo is None or not self.check_access(repo):
            return
        commit = repo.resolve(urllib.parse.unquote(parts[4]))
        if commit is None:
            return self.error(404, "RevisionNotFound", "Invalid rev id")
        path = "/".join(urllib.parse.unquote(p) for p in parts[5:])
        data = repo.commits[commit].get(path)
        if data is None:
            return self.error(404, "EntryNotFound", f"{path} does not exist")
        if self.state.redirect and self.cdn_base:
            self.send_response(302)
            self.send_header("Location", f"{self.cdn_base}/{parts[1]}/{parts[2]}/{commit}/{path}?sig=1")
            self.send_header("X-Repo-Commit", commit)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_file(path, data, commit)

    def send_file(self, path, data, commit):
        state = self.state
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        start, end = 0, len(data) - 1
        partial = False
        if match and not state.ignore_range:
            start = int(match.group(1))
            if match.group(2):
                end = min(int(match.group(2)), len(data) - 1)
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            partial = True
        body = data[start:end + 1]
        self.send_response(206 if partial else 200)
        if partial:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
        self.end_headers()
        limit = len(body)
        with state.lock:
            if state.cut_once and path.endswith(".safetensors") and path not in state.cut_done and len(body) > 1024:
                state.cut_done.add(path)
                limit = len(body) // 2
        sent = 0
        chunk = 16384
        try:
            while sent < limit:
                piece = body[sent:min(limit, sent + chunk)]
                self.wfile.write(piece)
                sent += len(piece)
                if state.delay_per_chunk:
                    self.wfile.flush()
                    time.sleep(state.delay_per_chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        if path.endswith(".safetensors"):
            with state.lock:
                state.weight_bytes_sent += sent
        if limit < len(body):
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)


class CdnHandler(HubHandler):
    """Serves /{owner}/{name}/{commit}/{path}: the pre-signed redirect target. Records whether
    an Authorization header ever reached it (it must not)."""

    def do_GET(self):
        self.state.log(self)
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.split("/")
        repo = self.state.repos.get(f"{parts[1]}/{parts[2]}")
        data = repo.commits.get(parts[3], {}).get("/".join(parts[4:])) if repo else None
        if data is None:
            return self.error(404)
        self.send_file("/".join(parts[4:]), data, parts[3])


class FakeHub:
    def __init__(self):
        self.state = HubState()
        self.cdn_state = HubState()
        self.cdn_state.repos = self.state.repos
        cdn_handler = type("Cdn", (CdnHandler,), {"state": self.cdn_state})
        self.cdn = http.server.ThreadingHTTPServer(("127.0.0.1", 0), cdn_handler)
        cdn_base = f"http://127.0.0.1:{self.cdn.server_address[1]}"
        handler = type("Hub", (HubHandler,), {"state": self.state, "cdn_base": cdn_base})
        self.hub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.endpoint = f"http://127.0.0.1:{self.hub.server_address[1]}"
        self.threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (self.hub, self.cdn)]
        for thread in self.threads:
            thread.start()

    def add_repo(self, repo_id, directory, *refs, access="public", commit=None, files=None):
        repo = self.state.repos.setdefault(repo_id, Repo(directory, access))
        commit = commit or commit_for(repo_id + ":" + ",".join(refs))
        repo.add_commit(commit, files if files is not None else read_tree(directory), *refs)
        return commit

    def reset(self):
        self.state.reset()
        self.cdn_state.reset()

    def close(self):
        for server in (self.hub, self.cdn):
            server.shutdown()
            server.server_close()
