"""frenzy_env.workload.datasets: catalogue, cache and downloads, against a local mirror (no network)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import re
import tarfile
import threading
from pathlib import Path

import pytest

from frenzy_env.errors import UnknownNameError
from frenzy_env.paths import PACKAGE_DATA
from frenzy_env.workload import datasets as ds
from frenzy_env.workload import read_trace

COMMIT = "0123456789abcdef0123456789abcdef01234567"
ITP_CSV = b"job_id,submission_time,duration,num_gpu\na,0,600,1\nb,30,1200,2\nc,90,3600,8\n" + b"".join(
    f"j{i},{100 + i},{700 + i},4\n".encode() for i in range(3000)
)  # ~60 kB: several reads, so that a resume has something to skip


def _targz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _download(path: str, data: bytes, repo: str = "fake/traces") -> ds.Download:
    return ds.Download(repo, COMMIT, path, len(data), hashlib.sha256(data).hexdigest())


PHILLY_LOG = [
    {  # two attempts: runs from the first start to the last end, 8 GPUs of the first attempt
        "status": "Pass",
        "vc": "vc1",
        "jobid": "application_2",
        "user": "u1",
        "submitted_time": "2017-10-07 01:11:39",
        "attempts": [
            {
                "start_time": "2017-10-07 01:12:09",
                "end_time": "2017-10-07 01:13:23",
                "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]}, {"ip": "m2", "gpus": ["gpu0"] * 4}],
            },
            {
                "start_time": "2017-10-07 01:13:30",
                "end_time": "2017-10-07 02:13:30",
                "detail": [{"ip": "m3", "gpus": ["gpu0"]}],
            },
        ],
    },
    {  # submitted first, killed
        "status": "Killed",
        "vc": "vc2",
        "jobid": "application_1",
        "user": "u2",
        "submitted_time": "2017-10-07 01:00:00",
        "attempts": [
            {"start_time": "2017-10-07 01:00:10", "end_time": "2017-10-07 01:00:40", "detail": [{"gpus": ["g"]}]}
        ],
    },
    {"status": "Failed", "vc": "vc1", "jobid": "no-attempt", "user": "u", "submitted_time": "2017-10-07 01:05:00"},
    {  # still running: no end time of the last attempt
        "status": "Pass",
        "vc": "vc1",
        "jobid": "running",
        "user": "u",
        "submitted_time": "2017-10-07 01:06:00",
        "attempts": [{"start_time": "2017-10-07 01:06:10", "end_time": None, "detail": [{"gpus": ["g"]}]}],
    },
]
PHILLY_TGZ = _targz(
    {"trace-data/cluster_gpu_util": b"x" * 100, "trace-data/cluster_job_log": json.dumps(PHILLY_LOG).encode()}
)
ITP_TGZ = _targz({"cluster01.csv": ITP_CSV, "LICENSE": b"MIT"})

FILES: dict[str, bytes] = {}  # mirror path -> bytes


def _entry(name: str, path: str, data: bytes, **kw) -> ds.TraceEntry:
    dl = _download(path, data)
    FILES[dl.mirror_path] = data
    return ds.TraceEntry(name, f"fake {name}", kw.pop("format", "itp"), dl, "MIT", "nobody", **kw)


CSV_ENTRY = _entry("plain", "data/plain.csv", ITP_CSV)
BAD_ENTRY = ds.TraceEntry(
    "bad", "wrong checksum", "itp", ds.Download("fake/traces", COMMIT, "data/plain.csv", len(ITP_CSV), "0" * 64), "", ""
)
ARCHIVE_ENTRY = _entry(
    "arch-01",
    "data/raw.tar.gz",
    ITP_TGZ,
    member="cluster01.csv",
    member_size=len(ITP_CSV),
    member_sha256=hashlib.sha256(ITP_CSV).hexdigest(),
)
ARCHIVE_ENTRY_2 = ds.TraceEntry("arch-02", "same archive", "itp", ARCHIVE_ENTRY.download, "", "", member="LICENSE")
PHILLY_ENTRY = _entry(
    "philly-fake",
    "trace-data.tar.gz",
    PHILLY_TGZ,
    format="canonical",
    member="cluster_job_log",
    convert="philly-job-log",
)
CATALOGUE = {e.name: e for e in (CSV_ENTRY, BAD_ENTRY, ARCHIVE_ENTRY, ARCHIVE_ENTRY_2, PHILLY_ENTRY)}


class _Handler(http.server.BaseHTTPRequestHandler):
    honour_range = True
    cut_after: int | None = None  # send only this many bytes of the body, then close the connection
    log: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        rng = self.headers.get("Range")
        type(self).log.append((self.path, rng))
        data = FILES.get(self.path.lstrip("/"))
        if data is None:
            self.send_error(404, "not in the mirror")
            return
        m = re.fullmatch(r"bytes=(\d+)-", rng or "")
        if m and type(self).honour_range:
            start = int(m.group(1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            data = data[start:]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        cut = type(self).cut_after
        self.wfile.write(data if cut is None else data[:cut])
        self.close_connection = True

    def log_message(self, *args) -> None:
        """No request log on stderr."""


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def mirror(server, monkeypatch):
    _Handler.log = []
    _Handler.honour_range = True
    _Handler.cut_after = None
    monkeypatch.delenv(ds.MIRROR_ENV, raising=False)
    monkeypatch.delenv(ds.CACHE_ENV, raising=False)
    return server


def _fetch(name, tmp_path, base_url, **kw):
    return ds.fetch(name, cache_dir=tmp_path, base_url=base_url, progress=False, catalogue=CATALOGUE, **kw)


def test_download_and_checksum(mirror, tmp_path):
    path = _fetch("plain", tmp_path, mirror)
    assert path == tmp_path / "plain.csv" and path.read_bytes() == ITP_CSV
    assert not (tmp_path / "plain.csv.part").exists()
    assert _Handler.log == [(f"/fake/traces/{COMMIT}/data/plain.csv", None)]
    assert read_trace(path, format=ds.trace_format("plain", CATALOGUE)).submit.size == 3003
    _fetch("plain", tmp_path, mirror)  # cached: no second request
    assert len(_Handler.log) == 1
    _fetch("plain", tmp_path, mirror, force=True)
    assert len(_Handler.log) == 2 and path.read_bytes() == ITP_CSV


def test_resume_partial_download(mirror, tmp_path):
    (tmp_path / "plain.csv.part").write_bytes(ITP_CSV[:20_000])
    path = _fetch("plain", tmp_path, mirror)
    assert _Handler.log == [(f"/fake/traces/{COMMIT}/data/plain.csv", "bytes=20000-")]
    assert path.read_bytes() == ITP_CSV


def test_interrupted_download_keeps_part_then_resumes(mirror, tmp_path):
    _Handler.cut_after = 25_000
    with pytest.raises(ds.DownloadError, match=r"run again to resume"):
        _fetch("plain", tmp_path, mirror)
    part = tmp_path / "plain.csv.part"
    assert part.read_bytes() == ITP_CSV[:25_000]  # what arrived is kept
    assert not (tmp_path / "plain.csv").exists()
    _Handler.cut_after = None
    assert _fetch("plain", tmp_path, mirror).read_bytes() == ITP_CSV
    assert _Handler.log[-1][1] == "bytes=25000-" and not part.exists()


def test_server_ignoring_range_restarts(mirror, tmp_path):
    _Handler.honour_range = False
    (tmp_path / "plain.csv.part").write_bytes(b"garbage that is not a prefix")
    path = _fetch("plain", tmp_path, mirror)
    assert _Handler.log[0][1] == "bytes=28-"  # asked to resume, got 200: restarted from scratch
    assert path.read_bytes() == ITP_CSV


def test_wrong_checksum_raises_and_leaves_nothing(mirror, tmp_path):
    with pytest.raises(ds.ChecksumError) as err:
        _fetch("bad", tmp_path, mirror)
    msg = str(err.value)
    assert "expected " + "0" * 64 in msg and hashlib.sha256(ITP_CSV).hexdigest() in msg and "bad.csv" in msg
    assert list(tmp_path.iterdir()) == []


def test_file_mirror(tmp_path, monkeypatch):
    root = tmp_path / "mirror"
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    monkeypatch.setenv(ds.MIRROR_ENV, root.as_uri())  # the environment variable, no base_url
    cache = tmp_path / "cache"
    path = ds.fetch("plain", cache_dir=cache, progress=False, catalogue=CATALOGUE)
    assert path.read_bytes() == ITP_CSV
    (cache / "plain.csv").rename(cache / "plain.csv.part")  # a "partial" file: file:// restarts cleanly
    assert ds.fetch("plain", cache_dir=cache, progress=False, catalogue=CATALOGUE).read_bytes() == ITP_CSV


def test_archive_member_and_shared_archive(mirror, tmp_path):
    path = _fetch("arch-01", tmp_path, mirror)
    assert path.read_bytes() == ITP_CSV
    assert (tmp_path / "downloads" / ARCHIVE_ENTRY.download.filename).is_file()  # kept: arch-02 shares it
    assert _fetch("arch-02", tmp_path, mirror).read_bytes() == b"MIT"
    assert len(_Handler.log) == 1  # one download for both


def test_philly_job_log_conversion(mirror, tmp_path):
    path = _fetch("philly-fake", tmp_path, mirror)
    assert not (tmp_path / "downloads" / PHILLY_ENTRY.download.filename).exists()  # used by no other entry
    lines = path.read_text().splitlines()
    assert lines == [
        "job_id,submit_time,num_gpus,duration,vc,user,status",
        "application_1,0,1,30,vc2,u2,Killed",
        "application_2,699,8,3681,vc1,u1,Pass",
    ]
    table = read_trace(path, format="canonical")
    assert table.names.tolist() == ["application_1", "application_2"] and table.gpus.tolist() == [1, 8]


def test_list_and_resolve(mirror, tmp_path, monkeypatch):
    rows = ds.list_traces(tmp_path, catalogue=CATALOGUE)
    assert [r.name for r in rows] == list(CATALOGUE) and not any(r.cached for r in rows)
    assert rows[0].size == len(ITP_CSV) and rows[0].path == tmp_path / "plain.csv"
    with pytest.raises(ds.NotCachedError, match=r"frenzy data fetch plain"):
        ds.resolve("plain", cache_dir=tmp_path, catalogue=CATALOGUE)
    _fetch("plain", tmp_path, mirror)
    assert ds.list_traces(tmp_path, catalogue=CATALOGUE)[0].cached
    assert ds.resolve("plain", cache_dir=tmp_path, catalogue=CATALOGUE) == tmp_path / "plain.csv"
    other = tmp_path / "mine.csv"
    other.write_bytes(ITP_CSV)
    assert ds.resolve(str(other), cache_dir=tmp_path, catalogue=CATALOGUE) == other
    with pytest.raises(ds.TraceNotFoundError, match=r"did you mean 'plain'"):
        ds.resolve("plainn", cache_dir=tmp_path, catalogue=CATALOGUE)
    with pytest.raises(UnknownNameError):
        ds.trace_format("nope")


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(ds.CACHE_ENV, str(tmp_path / "c"))
    assert ds.cache_dir() == tmp_path / "c"
    assert ds.list_traces()[0].path.parent == tmp_path / "c"
    monkeypatch.delenv(ds.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ds.cache_dir() == tmp_path / "xdg" / "frenzy-env" / "traces"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert ds.cache_dir() == Path.home() / ".cache" / "frenzy-env" / "traces"
    assert ds.cache_dir(tmp_path / "x") == tmp_path / "x"


def test_network_error_is_one_clear_line(mirror, tmp_path):
    missing = ds.TraceEntry("missing", "", "itp", _download("data/none.csv", b"abc"), "", "")
    with pytest.raises(ds.DownloadError) as err:
        ds.fetch(missing, cache_dir=tmp_path, base_url=mirror, progress=False)
    msg = str(err.value)
    assert "\n" not in msg and "HTTP 404" in msg and "data/none.csv" in msg and "mirror" in msg


def test_real_catalogue_is_well_formed():
    hex64, hex40 = re.compile(r"[0-9a-f]{64}"), re.compile(r"[0-9a-f]{40}")
    assert {"philly", "philly-raw", "itp-cluster02"} <= set(ds.CATALOGUE)
    for name, e in ds.CATALOGUE.items():
        assert e.name == name and e.format in ("itp", "philly", "canonical") and e.license and e.citation
        assert hex64.fullmatch(e.sha256) and e.size > 0 and hex40.fullmatch(e.download.commit)
        m = re.fullmatch(
            r"https://(raw\.githubusercontent\.com|media\.githubusercontent\.com/media)/([^/]+/[^/]+)/"
            r"([0-9a-f]{40})/(.+)",
            e.url,
        )
        assert m and m.group(2) == e.download.repo and m.group(3) == e.download.commit
        assert (m.group(1) != "raw.githubusercontent.com") == e.download.lfs
        if e.member_sha256 is not None:
            assert hex64.fullmatch(e.member_sha256) and e.member_size > 0
    # the shipped extract's attribution records the checksum of the same upstream cluster02.csv
    attribution = PACKAGE_DATA / "ATTRIBUTION.md"
    assert ds.CATALOGUE["itp-cluster02"].member_sha256 in attribution.read_text()
