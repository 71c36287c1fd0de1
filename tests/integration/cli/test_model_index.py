"""The model index (docs/model-index.md): paths, registration, prepare from hf:// against a fake
Hub on 127.0.0.1 (fake_hub.py), disk:// and hf-cache stores, selectors, remove, gc, concurrency
and kill -9 at several points. Every test gets its own data directory."""
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fake_hub import APPROVED_TOKEN, UNAPPROVED_TOKEN, FakeHub, read_tree

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"
TINY_A = FIXTURES / "tiny_a" / "hf_flat_fused"
TINY_B = FIXTURES / "tiny_b" / "hf_nested_experts_sharded"
TINY_C = FIXTURES / "tiny_c" / "hf_nested_fused"
SECRETS = (APPROVED_TOKEN, UNAPPROVED_TOKEN, "hf_env_secret_token_789")


@pytest.fixture(scope="module")
def hub():
    hub = FakeHub()
    hub.commit = {
        "a": hub.add_repo("acme/tiny-a", TINY_A, "main"),
        "b": hub.add_repo("acme/tiny-b", TINY_B, "main"),
        "b-dev": hub.add_repo("acme/tiny-b", TINY_B, "dev", "feature/x"),
        "c": hub.add_repo("acme/tiny-c", TINY_C, "main"),
        "private": hub.add_repo("acme/private", TINY_A, "main", access="token"),
        "gated": hub.add_repo("acme/gated", TINY_A, "main", access="gated"),
    }
    llama = read_tree(TINY_A)
    config = json.loads(llama["config.json"])
    config["model_type"] = "llama"
    llama["config.json"] = json.dumps(config).encode()
    hub.commit["llama"] = hub.add_repo("acme/llama", TINY_A, "main", files=llama)
    yield hub
    hub.close()


class Cli:
    """Runs the binary with a private data directory and HF_ENDPOINT at the fake Hub."""

    def __init__(self, binary, tmp_path, hub):
        self.binary = binary
        self.tmp = tmp_path
        self.data = tmp_path / "xdg-data" / "cherenkov"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("HF_", "HUGGING", "XDG_")) and k != "NO_COLOR"}
        self.env.update(XDG_DATA_HOME=str(tmp_path / "xdg-data"), XDG_CACHE_HOME=str(tmp_path / "xdg-cache"),
                        XDG_CONFIG_HOME=str(tmp_path / "xdg-config"), HF_HOME=str(tmp_path / "hf-home"),
                        HF_ENDPOINT=hub.endpoint)
        self.outputs = []

    def __call__(self, *args, check=True, env=None, timeout=60):
        result = subprocess.run([self.binary, *map(str, args)], capture_output=True, text=True,
                                env={**self.env, **(env or {})}, timeout=timeout)
        self.outputs.append(result.stdout + result.stderr)
        if check and result.returncode != 0:
            raise AssertionError(f"cherenkov {' '.join(map(str, args))} exited {result.returncode}: {result.stderr}")
        return result

    def json(self, *args, **kwargs):
        return json.loads(self(*args, "--json", **kwargs).stdout)

    def popen(self, *args, env=None):
        return subprocess.Popen([self.binary, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**self.env, **(env or {})})

    def index(self):
        path = self.data / "index.json"
        if not path.exists():
            return {"models": [], "artifacts": [], "stores": []}
        return json.loads(path.read_text())

    def artifact_dirs(self):
        root = self.data / "artifacts"
        return sorted(p.name for p in root.iterdir()) if root.exists() else []

    def check_consistent(self):
        """The index loads, every referenced artifact is present, and nothing is half-written."""
        listing = self.json("model", "list")
        index = self.index()
        artifacts = {a["id"]: a for a in index["artifacts"]}
        for model in index["models"]:
            for key in ("store", "retained_source", "description"):
                if key in model:
                    artifact = artifacts[model[key]]
                    assert artifact["state"] == "ready"
                    where = Path(artifact["path"]) if artifact["owner"] == "external" else self.data / "artifacts" / artifact["id"]
                    assert where.is_dir(), (key, where)
                    if key == "store":
                        assert (where / "manifest.json").exists()
                    if key == "description":
                        assert (where / "description.json").exists()
        return listing


@pytest.fixture
def cli(cherenkov_bin, tmp_path, hub):
    hub.reset()
    cli = Cli(cherenkov_bin, tmp_path, hub)
    yield cli
    for output in cli.outputs:
        for secret in SECRETS:
            assert secret not in output
    if cli.data.exists():
        for path in cli.data.rglob("*"):
            if path.is_file() and path.stat().st_size < (4 << 20) and not path.name.endswith((".bin", ".safetensors")):
                text = path.read_bytes().decode("utf-8", "replace")
                for secret in SECRETS:
                    assert secret not in text, path


def weight_bytes(directory):
    return sum(p.stat().st_size for p in Path(directory).glob("*.safetensors"))


def read_until(process, marker, timeout=30):
    """Reads the process's stderr until a line contains `marker`; returns the lines read."""
    lines, deadline = [], time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 0.2)
        if not ready:
            if process.poll() is not None:
                break
            continue
        line = process.stderr.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            return lines
    return lines


# ----------------------------------------------------------------------------------- paths


def test_paths_follow_xdg_and_root_and_create_nothing(cli, tmp_path):
    paths = cli.json("paths")
    assert paths["data"] == str(cli.data)
    assert paths["scratch"] == str(tmp_path / "xdg-cache" / "cherenkov")
    assert paths["config"] == str(tmp_path / "xdg-config" / "cherenkov" / "cherenkov.toml")
    assert paths["default_model"].startswith("hf://Sawfwair/Qwen3.8-Flash-Next-MLX-4bit@6cc9bbc0")
    relative = cli.json("paths", env={"XDG_DATA_HOME": "relative/dir", "HOME": str(tmp_path / "home")})
    assert relative["data"] == str(tmp_path / "home" / ".local" / "share" / "cherenkov")
    rooted = cli.json("paths", "--root", tmp_path / "root")
    assert rooted["data"] == str(tmp_path / "root")
    assert rooted["scratch"] == str(tmp_path / "root" / "scratch")
    assert rooted["config"] == str(tmp_path / "root" / "cherenkov.toml")
    assert "downloaded_model" in cli("paths").stdout
    assert not cli.data.exists() and not (tmp_path / "root").exists()


# ---------------------------------------------------------------------- register and inspect


def test_model_add_registers_metadata_only(cli, hub):
    result = cli("model", "add", "hf://acme/tiny-b", "--name", "tb")
    assert "registered tb" in result.stdout
    assert "headers" in result.stderr and "\r" not in result.stderr
    assert hub.state.weight_bytes_sent < weight_bytes(TINY_B) / 10
    model = cli.json("model", "list")["models"][0]
    assert model["alias"] == "tb" and model["prepared"] is False and model["store"] is None
    assert model["source"]["commit"] == hub.commit["b"] and model["source"]["revision"] == "main"
    assert model["source"]["endpoint"] == hub.endpoint
    # Adding again finds the entry; the index holds one model.
    assert "already registered" in cli("model", "add", "hf://acme/tiny-b").stdout
    assert len(cli.index()["models"]) == 1
    # Inspection of a registered, unprepared model uses the saved description, offline.
    offline = {"HF_ENDPOINT": "http://127.0.0.1:9"}
    report = cli.json("inspect", "tb", env=offline)
    assert report["kind"] == "checkpoint" and report["index"]["n_shards"] == 3
    assert "qwen4_exp" in cli("inspect", "tb", env=offline).stdout
    assert cli.json("model", "list", env=offline)["models"][0]["id"] == model["id"]
    cli.check_consistent()


def test_servers_that_ignore_range_are_rejected(cli, hub):
    hub.state.ignore_range = True
    result = cli("model", "add", "hf://acme/tiny-a", check=False)
    assert result.returncode == 1 and "ignores HTTP range requests" in result.stderr
    assert cli.index()["models"] == [] if cli.data.exists() and (cli.data / "index.json").exists() else True


@pytest.mark.parametrize("source, status, words", [
    ("hf://acme/missing", "401", "private or does not exist"),
    ("hf://acme/tiny-a@nope", "404", "no such revision"),
    ("hf://acme/private", "401", "private or does not exist"),
    ("hf://acme/gated", "401", "gated repository"),
])
def test_hub_errors_are_clear(cli, source, status, words):
    result = cli("model", "add", source, check=False)
    assert result.returncode == 1
    assert status in result.stderr and words in result.stderr, result.stderr


def test_credentials_come_from_flag_env_and_files_and_are_never_stored(cli, hub, tmp_path):
    bad = cli("model", "add", "hf://acme/gated", "--hf-token", UNAPPROVED_TOKEN, check=False)
    assert bad.returncode == 1 and "403" in bad.stderr and "gated" in bad.stderr
    bad = cli("model", "add", "hf://acme/private", env={"HF_TOKEN": UNAPPROVED_TOKEN}, check=False)
    assert bad.returncode == 1 and "invalid credentials" in bad.stderr
    cli("model", "add", "hf://acme/gated", "--hf-token", APPROVED_TOKEN)
    cli("model", "add", "hf://acme/private", env={"HF_TOKEN": APPROVED_TOKEN})
    token_file = tmp_path / "token-file"
    token_file.write_text(APPROVED_TOKEN + "\n")
    cli("inspect", "hf://acme/private", env={"HF_TOKEN_PATH": str(token_file)})
    (tmp_path / "hf-home").mkdir()
    (tmp_path / "hf-home" / "token").write_text(APPROVED_TOKEN)
    hub.state.redirect = True
    cli("prepare", "hf://acme/private", "--name", "priv")
    assert cli.json("model", "list")["models"][1]["prepared"] is True
    # The bearer token went to the Hub, never to the redirect target on another port.
    assert any(auth == f"Bearer {APPROVED_TOKEN}" for *_, auth in hub.state.requests)
    assert hub.cdn_state.requests and all(auth is None for *_, auth in hub.cdn_state.requests)
    # The fixture's teardown checks that no token reached the index, manifests or output.


def test_network_failure_is_reported(cli):
    result = cli("model", "add", "hf://acme/tiny-a", env={"HF_ENDPOINT": "http://127.0.0.1:9"}, check=False)
    assert result.returncode == 1 and "cannot reach http://127.0.0.1:9" in result.stderr


def test_unsupported_architecture_is_refused_before_weights(cli, hub):
    result = cli("prepare", "hf://acme/llama", check=False)
    assert result.returncode == 1 and "qwen4_exp" in result.stderr
    assert hub.state.weight_bytes_sent < weight_bytes(TINY_A) / 10


# --------------------------------------------------------------------------- prepare from hf


def test_prepare_downloads_packs_and_removes_the_download(cli, hub):
    result = cli("prepare", "hf://acme/tiny-a", "--name", "ta", "--experts", "4,2")
    assert "model ta ready" in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.startswith("cherenkov: download")]
    assert lines and all("/s" in line and "ETA" in line for line in lines)
    assert "prepare: experts" in result.stderr
    model = cli.check_consistent()["models"][0]
    assert model["prepared"] and model["store"]["variants"] == [4, 2] and model["retained_source"] is None
    store = Path(model["store"]["path"])
    assert store.parent == cli.data / "artifacts" and (store / "experts2.bin").exists()
    assert sorted(cli.artifact_dirs()) == sorted([store.name, cli.index()["models"][0]["description"]])
    assert not list(cli.data.rglob("*.incomplete"))
    assert cli.json("inspect", "ta")["kind"] == "cherenkov-store"
    # Preparing again reuses the store: no new download.
    before = hub.state.weight_bytes_sent
    again = cli.json("prepare", "ta", "--experts", "4,2,3")
    assert again["base_packed"] is False and again["derived"] == [3] and again["reused"] == [2]
    assert hub.state.weight_bytes_sent == before


def test_keep_source_redirects_resume_and_source_only_removal(cli, hub):
    hub.state.redirect = True
    hub.state.cut_once = True
    result = cli.json("prepare", "hf://acme/tiny-b", "--name", "tb", "--keep-source")
    assert result["downloaded"] and result["source_retained"] and not result["source_removed"]
    # The CDN answered every weight byte; no credentials ever reached it.
    assert hub.cdn_state.weight_bytes_sent >= weight_bytes(TINY_B)
    assert all(auth is None for *_, auth in hub.cdn_state.requests)
    resumed = [r for _, path, r, _ in hub.cdn_state.requests if r and not r.startswith("bytes=0-") and path.split("?")[0].endswith(".safetensors")]
    assert resumed, "interrupted transfers resume with a Range request"
    model = cli.check_consistent()["models"][0]
    kept = Path(model["retained_source"]["path"])
    assert sorted(p.name for p in kept.glob("*.safetensors")) == sorted(p.name for p in TINY_B.glob("*.safetensors"))
    for shard in TINY_B.glob("*.safetensors"):
        assert (kept / shard.name).read_bytes() == shard.read_bytes()
    # Repacking from the retained copy contacts nobody.
    shutil.rmtree(model["store"]["path"])
    hub.reset()
    again = cli.json("prepare", "tb", env={"HF_ENDPOINT": "http://127.0.0.1:9"})
    assert again["base_packed"] and not again["downloaded"]
    # --source-only releases the copy (after checking the store); gc deletes it.
    removed = cli.json("model", "remove", "tb", "--source-only")
    assert removed["released"] == [model["retained_source"]["id"]]
    assert kept.exists()
    gc = cli.json("model", "gc")
    assert [i["id"] for i in gc["items"] if i["action"] == "delete"] == [kept.name]
    assert not kept.exists() and Path(model["store"]["path"]).exists()
    assert cli.json("model", "list")["models"][0]["retained_source"] is None
    result = cli("model", "remove", "tb", "--source-only", check=False)
    assert result.returncode == 1 and "no retained source" in result.stderr


# -------------------------------------------------------------------------------- selectors


def test_selectors(cli, hub):
    cli("model", "add", "hf://acme/tiny-b@main", "--name", "tb")
    offline = {"HF_ENDPOINT": "http://127.0.0.1:9"}
    model_id = cli.json("model", "list")["models"][0]["id"]
    commit = hub.commit["b"]
    for selector in ("tb", model_id, f"hf://acme/tiny-b@{commit}", "hf://acme/tiny-b", commit[:8],
                     commit[:12].upper(), f"hf://acme/tiny-b@{commit[:8]}", "model:tb"):
        assert cli.json("inspect", selector, env=offline)["index"]["n_shards"] == 3, selector
    # Seven hex digits are a bare name, not a commit prefix; bare names never download.
    hub.reset()
    result = cli("prepare", commit[:7], check=False)
    assert result.returncode == 1 and "bare names never download" in result.stderr
    assert cli("prepare", "tiny-b", check=False).returncode == 1
    assert hub.state.requests == []
    # A revision with a slash resolves on the Hub and pins a second commit.
    cli("model", "add", "hf://acme/tiny-b@feature/x", "--name", "tb-dev")
    entries = {m["alias"]: m for m in cli.json("model", "list")["models"]}
    assert entries["tb-dev"]["source"]["commit"] == hub.commit["b-dev"]
    assert entries["tb-dev"]["source"]["revision"] == "feature/x"
    ambiguous = cli("inspect", "hf://acme/tiny-b", env=offline, check=False)
    assert ambiguous.returncode == 1 and "matches 2" in ambiguous.stderr and "@commit" in ambiguous.stderr
    # The alias moves only when asked; taken aliases are refused.
    taken = cli("model", "add", "hf://acme/tiny-a", "--name", "tb", check=False)
    assert taken.returncode == 1 and "already names model" in taken.stderr


@pytest.mark.parametrize("selector, words", [
    ("hf://acme/tiny-a?download=1", "queries"),
    ("hf://acme/tiny-a#main", "fragments"),
    ("hf://acme/tiny%2Da", "percent-escapes"),
    ("hf://acme/../tiny-a", "dot segments"),
    ("hf://acme/tiny-a@feature/../main", "'..'"),
    ("disk://./acme/tiny-a", "dot segments"),
    ("ftp://acme/tiny-a", "unknown scheme"),
])
def test_malformed_uris_are_rejected_without_network(cli, hub, selector, words):
    result = cli("model", "add", selector, check=False)
    assert result.returncode == 1 and words in result.stderr, result.stderr
    assert hub.state.requests == []


# ------------------------------------------------------------------------ filesystem stores


def make_hf_cache(root, repo, source, commit):
    """Writes the HF cache layout: blobs, snapshot symlinks, refs/main."""
    base = root / ("models--" + repo.replace("/", "--"))
    (base / "blobs").mkdir(parents=True)
    (base / "snapshots" / commit).mkdir(parents=True)
    (base / "refs").mkdir()
    for path in source.iterdir():
        blob = base / "blobs" / f"blob-{path.name}"
        blob.write_bytes(path.read_bytes())
        (base / "snapshots" / commit / path.name).symlink_to(Path("../..") / "blobs" / blob.name)
    (base / "refs" / "main").write_text(commit)
    return base


def test_disk_and_hf_cache_stores(cli, tmp_path, hub):
    models = tmp_path / "models"
    (models / "acme").mkdir(parents=True)
    subprocess.run(["cp", "-r", str(TINY_C), str(models / "acme" / "tiny-c")], check=True)
    cache = tmp_path / "hub-cache"
    commit = "0123456789abcdef0123456789abcdef01234567"
    cache_repo = make_hf_cache(cache, "acme/tiny-a", TINY_A, commit)
    cli("store", "add", "models", models)
    cli("store", "add", "cache", cache, "--layout", "hf-cache")
    stores = cli.json("store", "list")["stores"]
    assert [(s["name"], s["layout"], s["enabled"]) for s in stores] == [("models", "default", True), ("cache", "hf-cache", True)]
    assert cli("store", "add", "models", models, check=False).returncode == 1

    prepared = cli.json("prepare", "disk://models/acme/tiny-c", "--name", "tc")
    assert prepared["base_packed"] and not prepared["downloaded"]
    cli("prepare", f"disk://cache/acme/tiny-a@{commit[:8]}", "--name", "ta")
    entries = {m["alias"]: m for m in cli.check_consistent()["models"]}
    assert entries["ta"]["source"]["uri"] == f"disk://cache/acme/tiny-a@{commit}"
    assert entries["ta"]["source"]["path"] == str(cache_repo / "snapshots" / commit)
    assert cli.json("inspect", "disk://cache/acme/tiny-a")["kind"] == "cherenkov-store"  # refs/main
    missing = cli("model", "add", "disk://cache/acme/tiny-a@fedcba98", check=False)
    assert missing.returncode == 1 and "no cached snapshot" in missing.stderr
    assert hub.state.requests == []  # the cache is read without downloading

    cli("store", "disable", "cache")
    blocked = cli("inspect", "disk://cache/acme/tiny-a", check=False)
    assert blocked.returncode == 1 and "disabled" in blocked.stderr
    assert cli.json("inspect", "ta")["kind"] == "cherenkov-store"  # aliases keep working
    cli("store", "enable", "cache")
    cli("store", "remove", "cache")
    assert [s["name"] for s in cli.json("store", "list")["stores"]] == ["models"]
    assert cli.json("inspect", "ta")["kind"] == "cherenkov-store"

    # Removing models and collecting never touches external files.
    cli("model", "remove", "ta")
    cli("model", "remove", "tc")
    cli("model", "gc")
    assert (cache_repo / "snapshots" / commit / "config.json").exists()
    assert (models / "acme" / "tiny-c" / "model.safetensors").exists()
    assert [d for d in cli.artifact_dirs()] == []


def test_prepare_output_is_external_and_survives_gc(cli, tmp_path):
    out = tmp_path / "exported"
    cli("prepare", TINY_C, "--output", out, "--name", "tc")
    model = cli.check_consistent()["models"][0]
    assert model["store"]["owner"] == "external" and model["store"]["path"] == str(out)
    assert cli.json("inspect", out)["kind"] == "cherenkov-store"
    inside = cli("prepare", TINY_C, "--output", cli.data / "artifacts" / "x", check=False)
    assert inside.returncode == 1 and "outside the managed artifacts" in inside.stderr
    stray = cli.data / "artifacts" / "not-recorded"
    stray.mkdir()
    (stray / "keep.txt").write_text("mine")
    cli("model", "remove", "tc")
    dry = cli.json("model", "gc", "--dry-run")
    assert dry["dry_run"] and {i["action"] for i in dry["items"]} == {"forget", "delete"}
    gc = cli.json("model", "gc")
    assert any(i["action"] == "forget" and i["path"] == str(out) for i in gc["items"])
    assert (out / "manifest.json").exists() and (stray / "keep.txt").exists()
    assert TINY_C.exists()
    assert cli.index()["artifacts"] == []
    # Paths inside managed artifacts are not sources.
    bad = cli("model", "add", stray, check=False)
    assert bad.returncode == 1 and "managed artifacts" in bad.stderr


# ------------------------------------------------------------------------------ remove and gc


def test_gc_dry_run_and_leases(cli):
    cli("prepare", TINY_C, "--name", "tc")
    store = Path(cli.json("model", "list")["models"][0]["store"]["path"])
    cli("model", "remove", "tc")
    assert store.exists()  # remove deletes no files
    dry = cli.json("model", "gc", "--dry-run")
    assert dry["bytes_freed"] > 0 and store.exists()
    assert {i["id"] for i in dry["items"]} >= {store.name}
    with open(cli.data / "leases" / store.name, "a") as lease:
        fcntl.flock(lease, fcntl.LOCK_SH)  # a reader holds the store
        gc = cli.json("model", "gc")
        held = [i for i in gc["items"] if i["id"] == store.name]
        assert held[0]["action"] == "skip" and held[0]["reason"] == "in use"
        assert store.exists()
    gc = cli.json("model", "gc")
    assert [i["id"] for i in gc["items"]] == [store.name] and not store.exists()
    assert (cli.data / "leases" / store.name).exists()  # lock files stay
    assert "removed" in cli("model", "gc").stdout


def test_registering_a_managed_store_again_reuses_its_record(cli):
    cli("prepare", TINY_C, "--name", "tc")
    store = Path(cli.json("model", "list")["models"][0]["store"]["path"])
    cli("model", "remove", "tc")
    cli("model", "add", store, "--name", "again")
    model = cli.check_consistent()["models"][0]
    assert model["store"]["id"] == store.name and model["store"]["owner"] == "managed"
    assert cli.json("model", "gc")["items"] == [] or store.exists()
    assert store.exists()


# ----------------------------------------------------------------------------- progress modes


def run_on_terminal(cli, *args, env=None):
    master, slave = pty.openpty()
    process = subprocess.Popen([cli.binary, *map(str, args)], stdout=subprocess.PIPE, stderr=slave,
                               env={**cli.env, "TERM": "xterm", **(env or {})})
    os.close(slave)
    output = b""
    while True:
        try:
            ready, _, _ = select.select([master], [], [], 0.5)
        except OSError:
            break
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    process.wait()
    os.close(master)
    assert process.returncode == 0
    return output.decode("utf-8", "replace")


def test_progress_bars_on_a_terminal_plain_with_no_color(cli):
    bars = run_on_terminal(cli, "prepare", "hf://acme/tiny-a", "--name", "ta")
    assert "\r[" in bars and "ETA" in bars
    cli("model", "remove", "ta")
    plain = run_on_terminal(cli, "prepare", "hf://acme/tiny-a", env={"NO_COLOR": "1"})
    assert "\r" not in plain.replace("\r\n", "\n") and "cherenkov: download" in plain


# ------------------------------------------------------------------- concurrency and crashes


def test_two_processes_preparing_and_collecting(cli, hub):
    hub.state.delay_per_chunk = 0.01
    first = cli.popen("prepare", "hf://acme/tiny-b", "--name", "tb")
    second = cli.popen("prepare", "hf://acme/tiny-b")
    other = cli.popen("prepare", "hf://acme/tiny-c", "--name", "tc", "--keep-source")
    collections = 0
    while any(p.poll() is None for p in (first, second, other)):
        result = cli("model", "gc", "--json")
        json.loads(result.stdout)
        collections += 1
    for process in (first, second, other):
        _, err = process.communicate()
        assert process.returncode == 0, err
    assert collections > 0
    listing = cli.check_consistent()
    assert sorted(m["reference"] for m in listing["models"]) == ["tb", "tc"]
    cli("model", "gc")
    index = cli.index()
    referenced = {m[k] for m in index["models"] for k in ("store", "retained_source", "description") if k in m}
    assert {a["id"] for a in index["artifacts"]} == referenced
    assert set(cli.artifact_dirs()) == referenced


@pytest.mark.parametrize("marker", [
    "resolving",            # registration: before and during header reads
    "download model-",      # mid-download of a shard
    "preparing",            # packing
    "removing the download",
])
def test_kill_during_prepare_then_recover(cli, hub, marker):
    hub.state.delay_per_chunk = 0.02
    process = cli.popen("prepare", "hf://acme/tiny-b", "--name", "tb")
    read_until(process, marker)
    if marker.startswith("download"):
        time.sleep(0.1)  # let part of the shard arrive
    os.kill(process.pid, signal.SIGKILL)
    print("killed" if process.wait() == -signal.SIGKILL else "finished first", marker)
    cli.check_consistent()
    hub.state.delay_per_chunk = 0
    if marker == "download model-":
        # The next prepare adopts the abandoned download and resumes it.
        hub.state.requests.clear()
        cli("prepare", "hf://acme/tiny-b", "--name", "tb")
        ranges = [r for _, path, r, _ in hub.state.requests if r and path.endswith(".safetensors") and not r.startswith("bytes=0-")]
        assert ranges, "the interrupted shard resumes with a Range request"
    else:
        gc = cli.json("model", "gc")
        assert all(i["action"] in ("delete", "forget") for i in gc["items"])
        cli("prepare", "hf://acme/tiny-b", "--name", "tb")
    cli("model", "gc")
    index = cli.index()
    assert all(a["state"] == "ready" for a in index["artifacts"])
    assert len(index["models"]) == 1 and "store" in index["models"][0]
    assert not list(cli.data.rglob("*.incomplete")) and not list(cli.data.rglob(".*.partial-*"))
    assert not list(cli.data.glob("index.json.tmp-*"))
    cli.check_consistent()


def test_kill_during_gc_then_recover(cli):
    cli("prepare", TINY_C, "--name", "tc")
    index = cli.index()
    for number in range(40):
        artifact_id = f"{number:016x}"
        directory = cli.data / "artifacts" / artifact_id
        directory.mkdir()
        for part in range(150):
            (directory / f"part-{part}").write_bytes(b"x" * 64)
        index["artifacts"].append({"id": artifact_id, "kind": "source", "owner": "managed",
                                   "state": "importing" if number % 2 else "ready",
                                   "model": index["models"][0]["id"]})
    (cli.data / "index.json").write_text(json.dumps(index))
    process = cli.popen("model", "gc")
    read_until(process, "removing")
    time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    cli.check_consistent()
    states = {a["state"] for a in cli.index()["artifacts"]}
    assert states <= {"ready", "deleting", "importing"}
    cli("model", "gc")
    index = cli.index()
    referenced = {m[k] for m in index["models"] for k in ("store", "description") if k in m}
    assert {a["id"] for a in index["artifacts"]} == referenced
    assert set(cli.artifact_dirs()) == referenced


# ---------------------------------------------------------------------------- deprecated download


def test_deprecated_download_then_prepare_its_path(cli, hub):
    result = cli("download", "acme/tiny-a", "--metadata-only")
    path = Path(result.stdout.strip())
    assert "deprecated" in result.stderr
    assert path == cli.data / "downloads" / "acme" / "tiny-a"
    assert (path / "config.json").exists() and not list(path.glob("*.safetensors"))
    result = cli("download", "hf://acme/tiny-b", "--revision", "feature/x")
    assert hub.commit["b-dev"] in result.stderr
    cli("download", "acme/tiny-a")
    assert weight_bytes(path) == weight_bytes(TINY_A)
    cli("prepare", path, "--name", "from-download")
    assert cli.check_consistent()["models"][0]["source"]["kind"] == "local"
