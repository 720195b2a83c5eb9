"""The public trace catalogue and a local cache of it: real traces on demand.

The package ships a one-week ITP extract; whole public traces are downloaded on demand from their original
upstream locations, pinned to a commit, checked against a recorded size and SHA-256, and kept in a cache
folder:

- ``$FRENZY_ENV_CACHE`` if set, else ``$XDG_CACHE_HOME/frenzy-env/traces``, else
  ``~/.cache/frenzy-env/traces``.

A trace in the cache is one CSV, ``<cache>/<name>.csv``, in the format :func:`trace_format` names (the
``format`` argument of :func:`frenzy_env.workload.read_trace`). Upstream files that are archives are kept in
``<cache>/downloads/`` when several traces come out of them (the ITP archive holds ten clusters), and deleted
after use otherwise.

Mirrors: ``base_url=`` (or ``$FRENZY_ENV_MIRROR``) replaces the upstream prefix
(``https://raw.githubusercontent.com/`` or, for Git LFS files, ``https://media.githubusercontent.com/media/``):
a file is then fetched from ``<base_url>/<owner>/<repo>/<commit>/<path>`` (see :attr:`Download.mirror_path`).
``http(s)://`` and ``file://`` mirrors work.

Downloads stream in 1 MiB chunks to ``<file>.part``, resume a partial ``.part`` with an HTTP ``Range``
request (restarting from scratch when the server answers 200 instead of 206), verify the size and SHA-256
and move the file into place atomically (:func:`os.replace`).

Functions: :func:`fetch`, :func:`list_traces`, :func:`resolve`, :func:`trace_format`, :func:`get`,
:func:`cache_dir`, :func:`convert_philly_job_log`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import http.client
import json
import os
import re
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NamedTuple

from frenzy_env.errors import FrenzyError, unknown_name
from frenzy_env.paths import atomic_open

CACHE_ENV = "FRENZY_ENV_CACHE"
MIRROR_ENV = "FRENZY_ENV_MIRROR"
RAW_PREFIX = "https://raw.githubusercontent.com/"
LFS_PREFIX = "https://media.githubusercontent.com/media/"
CHUNK = 1 << 20  # bytes per read while downloading and hashing
TIMEOUT_S = 60.0  # socket timeout of one download request
USER_AGENT = "frenzy-env (trace downloader; python urllib)"


# ------------------------------------------------------------------------------------------------- errors
class DatasetError(FrenzyError):
    """Base class of the errors of this module."""


class DownloadError(DatasetError, OSError):
    """A download failed (network, HTTP status, truncated transfer); the message names the URL."""


class ChecksumError(DatasetError, ValueError):
    """A downloaded or extracted file whose size or SHA-256 differs from the catalogue's."""


class TraceNotFoundError(DatasetError, FileNotFoundError):
    """Neither an existing file nor a catalogue trace name."""


class NotCachedError(TraceNotFoundError):
    """A catalogue trace that has not been downloaded yet."""


# ---------------------------------------------------------------------------------------------- catalogue
@dataclass(frozen=True)
class Download:
    """One upstream file in a public GitHub repository, pinned to a commit."""

    repo: str  # "owner/name"
    commit: str  # 40 hex digits
    path: str  # path inside the repository
    size: int  # bytes
    sha256: str  # 64 hex digits
    lfs: bool = False  # stored with Git LFS: the repository holds a pointer, the media URL the content

    @property
    def mirror_path(self) -> str:
        """``owner/repo/commit/path``: where the file lies under a mirror's base URL (and upstream's)."""
        return f"{self.repo}/{self.commit}/{self.path}"

    @property
    def url(self) -> str:
        """The original upstream URL, pinned to :attr:`commit`."""
        return (LFS_PREFIX if self.lfs else RAW_PREFIX) + urllib.parse.quote(self.mirror_path)

    @property
    def filename(self) -> str:
        """Name of the file in ``<cache>/downloads``: owner, repository, short commit and base name."""
        owner, name = self.repo.split("/", 1)
        return f"{owner}+{name}-{self.commit[:10]}-{Path(self.path).name}"

    def url_for(self, base_url: str | None) -> str:
        """The upstream URL, or the file's place under a mirror's ``base_url``."""
        if not base_url:
            return self.url
        return base_url.rstrip("/") + "/" + urllib.parse.quote(self.mirror_path)


@dataclass(frozen=True)
class TraceEntry:
    """A trace of the catalogue: where it comes from and how it becomes ``<cache>/<name>.csv``.

    ``member``: the file inside the downloaded ``.tar.gz`` (None: the download is the trace itself);
    ``member_size``/``member_sha256``: checked after extraction; ``convert``: the name of a converter from
    the upstream file to the CSV (only ``"philly-job-log"``, see :func:`convert_philly_job_log`).
    """

    name: str
    description: str
    format: str  # the format argument of frenzy_env.workload.read_trace
    download: Download
    license: str
    citation: str
    jobs: int | None = None  # rows of the CSV, when known
    member: str | None = None
    member_size: int | None = None
    member_sha256: str | None = None
    convert: str | None = None
    note: str = ""

    @property
    def url(self) -> str:
        return self.download.url

    @property
    def sha256(self) -> str:
        return self.download.sha256

    @property
    def size(self) -> int:
        return self.download.size

    @property
    def filename(self) -> str:
        return f"{self.name}.csv"


_ITP_RAW = Download(
    repo="microsoft/elasticflow-traces",
    commit="277ed24d0e908c31a1c98145819e2e3853d8ac00",
    path="data/raw-traces.tar.gz",
    size=1_943_846,
    sha256="67398e1a89245c50ae0881bf997e6cda0c95f9f47980af5bc56d67998965669f",
)
_ITP_LICENSE = "MIT (Copyright (c) Microsoft Corporation; LICENSE inside the archive)"
_ITP_CITATION = (
    'Gu et al., "ElasticFlow: An Elastic Serverless Training Platform for Distributed Deep Learning", ASPLOS 2023'
)
# cluster -> (bytes, sha256, jobs) of the member cNN.csv of raw-traces.tar.gz
_ITP_MEMBERS: dict[str, tuple[int, str, int]] = {
    "01": (83_726, "27d707f576fce5637f9efec43f610da3d335f36e3c6fd4ded2f5bccfce05974a", 1_595),
    "02": (301_866, "7a5849e73aff9f9bc33f87c9bacadf8aab2f3a9e7bc5d70956f5cbf40126526c", 5_778),
    "03": (158_198, "282d765c5289ab0ba870f494dd2c67893f9d16d726fdc8a51f13b7412515dbf8", 3_011),
    "04": (825_103, "247850e4265f35749e98d15e82a67765301e81272334265f1fe60d65787892a9", 15_802),
    "05": (189_032, "1553359ddd673a0ffc531ca10e73ba729dbacbce905ce878dbb8499d2dbed0fb", 3_629),
    "06": (125_228, "52c0d9247d1de9b19a8bdafc25137daf6fa04f274ad3a2eb6dac51226ac2362e", 2_396),
    "07": (662_831, "d4f46f32e2965c2265b2675c070565a86e40bff45733c828c5767bc0b8c1b318", 12_699),
    "08": (682_210, "d60c20d0cd05ddf49fddffabbc784ba6177bbc1a762fc5cf8a0bc9056b084db8", 13_047),
    "09": (586_203, "da4047d6f09cc41709ff85937c82e31f6a6791c896d22e241ae9e1dc7f82bcfd", 11_134),
    "10": (13_689, "139abea485b52090f5950d0f28d82878169df408e36052ec5c7cd04a3f3fcfa7", 260),
}

_PHILLY_CITATION = (
    'Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC 2019'
)

_ENTRIES: list[TraceEntry] = [
    *(
        TraceEntry(
            name=f"itp-cluster{c}",
            description=f"Microsoft ITP GPU cluster {c}, 2021-03-04 to 2021-05-03 ({jobs:,} jobs)",
            format="itp",
            download=_ITP_RAW,
            license=_ITP_LICENSE,
            citation=_ITP_CITATION,
            jobs=jobs,
            member=f"cluster{c}.csv",
            member_size=size,
            member_sha256=sha,
        )
        for c, (size, sha, jobs) in _ITP_MEMBERS.items()
    ),
    TraceEntry(
        name="philly",
        description="Microsoft Philly trace, one row per job, 2017 (82,247 jobs; flattened by the Pollux artifact)",
        format="philly",
        download=Download(
            repo="petuum/adaptdl",
            commit="c793c7089bd307462686339d29707925c461f9a9",  # branch osdi21-artifact
            path="simulator/traces/philly.csv",
            size=3_444_496,
            sha256="ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da",
        ),
        license="CC BY 4.0 (Philly trace data); repository Apache-2.0",
        citation=_PHILLY_CITATION + '; flattened by Qiao et al., "Pollux", OSDI 2021 (artifact)',
        jobs=82_247,
        note="the flattening rule is Pollux's (undocumented upstream); philly-raw applies the upstream notebook's",
    ),
    TraceEntry(
        name="philly-raw",
        description="Microsoft Philly trace from the original release: cluster_job_log converted to canonical CSV",
        format="canonical",
        download=Download(
            repo="msr-fiddle/philly-traces",
            commit="29a1b87fa2d9ed80b83c9e3a37f3a88d382b031d",
            path="trace-data.tar.gz",
            size=1_055_988_361,
            sha256="2037ccf63a725a02be718b0e1aeee6142c90b7f62d0d849295120e9f6ba13d2c",
            lfs=True,
        ),
        license="CC BY 4.0 (data)",
        citation=_PHILLY_CITATION,
        member="cluster_job_log",
        convert="philly-job-log",
        note="a 1.0 GB download (GPU/CPU/memory utilisation logs included); the archive is deleted after conversion",
    ),
]

#: The public trace catalogue, by name.
CATALOGUE: dict[str, TraceEntry] = {e.name: e for e in _ENTRIES}


def get(name: str, catalogue: Mapping[str, TraceEntry] | None = None) -> TraceEntry:
    """The catalogue entry of ``name`` (an :class:`~frenzy_env.errors.UnknownNameError` naming the known ones)."""
    cat = CATALOGUE if catalogue is None else catalogue
    if name not in cat:
        raise unknown_name("trace", name, cat)
    return cat[name]


def trace_format(name: str, catalogue: Mapping[str, TraceEntry] | None = None) -> str:
    """The ``format`` to pass to :func:`frenzy_env.workload.read_trace` for the cached trace ``name``."""
    return get(name, catalogue).format


# ------------------------------------------------------------------------------------------------- cache
def cache_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache folder: ``cache_dir`` if given, else ``$FRENZY_ENV_CACHE``, else the user cache."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "frenzy-env" / "traces"


class TraceStatus(NamedTuple):
    """A row of :func:`list_traces`."""

    name: str
    cached: bool
    path: Path  # where the trace is (or will be) in the cache
    size: int  # bytes on disk if cached, else bytes to download


def list_traces(
    cache_dir: str | os.PathLike | None = None, *, catalogue: Mapping[str, TraceEntry] | None = None
) -> list[TraceStatus]:
    """Every catalogue trace, in catalogue order, with whether it is in the cache."""
    root = _cache(cache_dir)
    cat = CATALOGUE if catalogue is None else catalogue
    rows = []
    for entry in cat.values():
        path = root / entry.filename
        cached = path.is_file()
        rows.append(TraceStatus(entry.name, cached, path, path.stat().st_size if cached else entry.size))
    return rows


def resolve(
    name_or_path: str | os.PathLike,
    *,
    cache_dir: str | os.PathLike | None = None,
    catalogue: Mapping[str, TraceEntry] | None = None,
) -> Path:
    """A trace file to read: a catalogue name gives its cached file, an existing file is returned as is.

    A catalogue name wins over a file of the same name in the working directory (write ``./NAME`` for
    the file). A catalogue trace not yet downloaded raises :class:`NotCachedError` telling the user to run
    ``frenzy data fetch NAME``; anything else raises :class:`TraceNotFoundError`.
    """
    cat = CATALOGUE if catalogue is None else catalogue
    text = os.fspath(name_or_path)
    if text in cat:
        path = _cache(cache_dir) / cat[text].filename
        if not path.is_file():
            raise NotCachedError(
                f"trace {text!r} is not downloaded (not in {path.parent}); run `frenzy data fetch {text}`"
            )
        return path
    path = Path(text).expanduser()
    if path.is_file():
        return path
    import difflib

    hint = difflib.get_close_matches(text, list(cat), n=1)
    did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise TraceNotFoundError(
        f"no such file {text!r} and no catalogue trace of that name{did_you_mean}; "
        f"known traces: {', '.join(cat)} (`frenzy data list`)"
    )


def _cache(cache_dir_: str | os.PathLike | None) -> Path:
    return cache_dir(cache_dir_)


# ------------------------------------------------------------------------------------------------- fetch
def fetch(
    name: str | TraceEntry,
    *,
    cache_dir: str | os.PathLike | None = None,
    base_url: str | None = None,
    progress: bool = True,
    force: bool = False,
    catalogue: Mapping[str, TraceEntry] | None = None,
) -> Path:
    """Download the trace ``name`` (or a :class:`TraceEntry`) into the cache and return its CSV's path.

    A trace already in the cache is returned without network access unless ``force``. ``base_url`` (default
    ``$FRENZY_ENV_MIRROR``) fetches from a mirror instead of upstream. ``progress`` shows a tqdm bar on a
    terminal (never when stderr is not a TTY). Raises :class:`DownloadError` (network),
    :class:`ChecksumError` (size or SHA-256 mismatch; the bad file is deleted).
    """
    cat = CATALOGUE if catalogue is None else catalogue
    entry = name if isinstance(name, TraceEntry) else get(name, cat)
    root = _cache(cache_dir)
    target = root / entry.filename
    if target.is_file() and not force:
        return target
    if base_url is None:
        base_url = os.environ.get(MIRROR_ENV) or None
    root.mkdir(parents=True, exist_ok=True)
    if entry.member is None and entry.convert is None:
        download(entry.download, target, base_url=base_url, progress=progress, force=force, label=entry.name)
        return target
    archive = root / "downloads" / entry.download.filename
    download(entry.download, archive, base_url=base_url, progress=progress, force=force, label=entry.name)
    part = target.with_name(target.name + ".part")
    try:
        if entry.convert == "philly-job-log":
            with _open_member(archive, entry.member or "cluster_job_log") as src:
                convert_philly_job_log(src, part)
        elif entry.convert is not None:
            raise DatasetError(f"trace {entry.name!r}: unknown converter {entry.convert!r}")
        else:
            _extract_member(archive, entry, part)
        os.replace(part, target)
    finally:
        part.unlink(missing_ok=True)
    shared = sum(e.download == entry.download for e in cat.values() if e.name != entry.name)
    if not shared:  # nothing else comes out of this archive
        archive.unlink(missing_ok=True)
    return target


def download(
    source: Download,
    dest: str | os.PathLike,
    *,
    base_url: str | None = None,
    progress: bool = True,
    force: bool = False,
    label: str | None = None,
) -> Path:
    """Download ``source`` to ``dest`` (resuming ``dest.part``), verify its size and SHA-256, return ``dest``.

    An existing ``dest`` of the right size is kept unless ``force``.
    """
    dest = Path(dest)
    if dest.is_file() and not force and dest.stat().st_size == source.size:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    if force:
        part.unlink(missing_ok=True)
    url = source.url_for(base_url)
    digest = hashlib.sha256()
    offset = part.stat().st_size if part.is_file() else 0
    if offset > source.size:  # longer than the file: cannot be a prefix of it
        part.unlink()
        offset = 0
    if offset:
        with part.open("rb") as f:
            for block in iter(lambda: f.read(CHUNK), b""):
                digest.update(block)
    if offset < source.size:
        offset, digest = _transfer(url, part, offset, digest, source.size, progress, label or Path(source.path).name)
    if offset != source.size:
        raise DownloadError(
            f"download of {url} stopped at {offset:,} of {source.size:,} bytes; run again to resume ({part} is kept)"
        )
    actual = digest.hexdigest()
    if actual != source.sha256:
        part.unlink(missing_ok=True)
        raise ChecksumError(
            f"{dest.name}: SHA-256 mismatch for {url}: expected {source.sha256}, got {actual}; "
            "the file was deleted (a corrupt download or a wrong mirror)"
        )
    os.replace(part, dest)
    return dest


def _transfer(url: str, part: Path, offset: int, digest, total: int, progress: bool, label: str) -> tuple[int, object]:
    """Append ``url`` from byte ``offset`` to ``part`` (or restart it); return its size and SHA-256 object.

    ``digest`` holds the hash of the first ``offset`` bytes; a restart starts a new one.
    """
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # the range is not satisfiable: the .part is wrong, start again
            part.unlink(missing_ok=True)
            return _transfer(url, part, 0, hashlib.sha256(), total, progress, label)
        raise _network_error(url, f"HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise _network_error(url, _reason(exc)) from None
    with response:
        status = getattr(response, "status", None)
        resumed = bool(offset) and status == 206 and _range_start(response) == offset
        if offset and not resumed:  # the server ignored Range (200, or file://): restart from scratch
            offset = 0
            digest = hashlib.sha256()
        from frenzy_env.progress import progress_bar

        bar = progress_bar(
            total,
            show=progress,
            initial=offset,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=label,
            leave=False,
        )
        try:
            with part.open("ab" if resumed else "wb") as out:
                while True:
                    try:
                        block = response.read(CHUNK)
                    except (http.client.HTTPException, OSError, ValueError) as exc:
                        raise _network_error(
                            url, f"{_reason(exc)} after {offset:,} bytes; run again to resume"
                        ) from None
                    if not block:
                        break
                    out.write(block)
                    digest.update(block)
                    offset += len(block)
                    bar.update(len(block))
                    if offset > total:
                        break
        finally:
            bar.close()
    if offset > total:
        part.unlink(missing_ok=True)
        raise ChecksumError(f"{url}: more than the expected {total:,} bytes; the partial file was deleted")
    return offset, digest


def _range_start(response) -> int | None:
    """First byte of a 206 answer's ``Content-Range: bytes START-END/TOTAL``."""
    m = re.match(r"\s*bytes\s+(\d+)-", response.headers.get("Content-Range", "") or "")
    return int(m.group(1)) if m else None


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or exc
    return " ".join(str(reason).split()) or type(exc).__name__


def _network_error(url: str, reason: str) -> DownloadError:
    return DownloadError(
        f"cannot download {url}: {reason} (check the network, or use a mirror: --mirror URL or ${MIRROR_ENV})"
    )


# ------------------------------------------------------------------------------------------ extraction
def _find_member(tar: tarfile.TarFile, member: str):
    """The regular file ``member`` (or ``*/member``) of a tar stream, as (TarInfo, file object)."""
    for info in tar:
        if info.isfile() and (info.name == member or info.name.endswith("/" + member)):
            return info, tar.extractfile(info)
    return None, None


class _MemberStream:
    """Context manager: a file member of a ``.tar.gz`` read as a stream (the archive is never unpacked)."""

    def __init__(self, archive: Path, member: str) -> None:
        self.archive, self.member = archive, member

    def __enter__(self) -> BinaryIO:
        try:
            self.tar = tarfile.open(self.archive, mode="r|*")
        except tarfile.TarError as exc:
            raise DatasetError(f"{self.archive}: not a readable tar archive ({exc})") from None
        info, f = _find_member(self.tar, self.member)
        if f is None:
            self.tar.close()
            raise DatasetError(f"{self.archive}: no file {self.member!r} in the archive")
        return f

    def __exit__(self, *exc) -> None:
        self.tar.close()


def _open_member(archive: Path, member: str) -> _MemberStream:
    return _MemberStream(archive, member)


def _extract_member(archive: Path, entry: TraceEntry, dest: Path) -> None:
    """Copy ``entry.member`` out of ``archive`` to ``dest``, checking its size and SHA-256 when known."""
    digest = hashlib.sha256()
    size = 0
    with _open_member(archive, entry.member or "") as src, dest.open("wb") as out:
        for block in iter(lambda: src.read(CHUNK), b""):
            out.write(block)
            digest.update(block)
            size += len(block)
    if entry.member_sha256 is not None and (
        digest.hexdigest() != entry.member_sha256 or (entry.member_size is not None and size != entry.member_size)
    ):
        dest.unlink(missing_ok=True)
        raise ChecksumError(
            f"{archive.name}: member {entry.member!r} has SHA-256 {digest.hexdigest()} ({size:,} bytes), "
            f"expected {entry.member_sha256} ({entry.member_size:,} bytes)"
        )


# ------------------------------------------------------------------------------------------ conversion
_PHILLY_TIME = "%Y-%m-%d %H:%M:%S"
PHILLY_CANONICAL_COLUMNS = ("job_id", "submit_time", "num_gpus", "duration", "vc", "user", "status")


def _philly_time(value: object) -> _dt.datetime | None:
    if value is None or value == "" or value == "None":
        return None
    try:
        return _dt.datetime.strptime(str(value), _PHILLY_TIME)
    except ValueError:
        return None


def philly_jobs(jobs: Iterable[Mapping]) -> list[tuple]:
    """Rows ``(job_id, submit_time, num_gpus, duration, vc, user, status)`` of the Philly ``cluster_job_log``.

    The rule is the upstream notebook's (msr-fiddle/philly-traces, ``analysis/Philly Trace Analysis.ipynb``,
    class ``Job``): ``num_gpus`` is the number of GPUs of the *first* attempt (summed over its machines);
    the run time is the *last* attempt's ``end_time`` minus the *first* attempt's ``start_time``. Jobs are
    skipped when that is undefined: no attempt, no start time of the first attempt or no end time of the
    last (still running when the log was taken), no GPUs, no submission time, a run time of 0 s or less, or
    a job id seen before. ``submit_time`` is seconds after the earliest kept submission (rows sorted by it,
    stably); times are the log's local wall-clock strings, read without a time zone. Every status is kept
    (``Pass``, ``Killed``, ``Failed``).
    """
    rows: list[tuple] = []
    seen: set[str] = set()
    for job in jobs:
        attempts = job.get("attempts") or []
        jobid = str(job.get("jobid") or "").strip()
        submitted = _philly_time(job.get("submitted_time"))
        if not attempts or not jobid or jobid in seen or submitted is None:
            continue
        first, last = attempts[0], attempts[-1]
        start, end = _philly_time(first.get("start_time")), _philly_time(last.get("end_time"))
        gpus = sum(len(d.get("gpus") or ()) for d in first.get("detail") or ())
        if start is None or end is None or gpus < 1:
            continue
        duration = (end - start).total_seconds()
        if duration <= 0:
            continue
        seen.add(jobid)
        rows.append(
            (jobid, submitted, gpus, duration, job.get("vc") or "", job.get("user") or "", job.get("status") or "")
        )
    if not rows:
        return []
    t0 = min(r[1] for r in rows)
    out = [(r[0], (r[1] - t0).total_seconds(), *r[2:]) for r in rows]
    out.sort(key=lambda r: r[1])  # stable: equal submissions keep the log's order
    return out


def convert_philly_job_log(src: str | os.PathLike | BinaryIO, dest: str | os.PathLike) -> int:
    """Convert a Philly ``cluster_job_log`` (a JSON list; a path or a binary file) to a canonical CSV.

    Columns: ``job_id, submit_time, num_gpus, duration`` (read by ``read_trace(format="canonical")``) and
    ``vc, user, status`` (kept for reference; the loader ignores them). See :func:`philly_jobs` for the
    rule. Returns the number of jobs written. The whole log is parsed in memory.
    """
    import csv

    if isinstance(src, (str, os.PathLike)):
        with open(src, "rb") as f:
            jobs = json.load(f)
    else:
        jobs = json.load(src)  # bytes: json detects the UTF encoding
    if not isinstance(jobs, list):
        raise DatasetError(f"Philly job log: expected a JSON list of jobs, got {type(jobs).__name__}")
    rows = philly_jobs(jobs)
    if not rows:
        raise DatasetError("Philly job log: no job with a complete run time")
    with atomic_open(dest, newline="", encoding="utf-8") as out:
        w = csv.writer(out)
        w.writerow(PHILLY_CANONICAL_COLUMNS)
        for jobid, submit, gpus, duration, vc, user, status in rows:
            w.writerow((jobid, f"{submit:g}", gpus, f"{duration:g}", vc, user, status))
    return len(rows)


def remove(name: str, *, cache_dir: str | os.PathLike | None = None) -> bool:
    """Delete the cached trace ``name`` (and its ``.part``); True if something was deleted."""
    path = _cache(cache_dir) / get(name).filename
    found = path.is_file()
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".part").unlink(missing_ok=True)
    return found


__all__ = [
    "CACHE_ENV",
    "CATALOGUE",
    "MIRROR_ENV",
    "ChecksumError",
    "DatasetError",
    "Download",
    "DownloadError",
    "NotCachedError",
    "TraceEntry",
    "TraceNotFoundError",
    "TraceStatus",
    "cache_dir",
    "convert_philly_job_log",
    "download",
    "fetch",
    "get",
    "list_traces",
    "philly_jobs",
    "remove",
    "resolve",
    "trace_format",
]
