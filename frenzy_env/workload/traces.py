"""Trace files: reading and validating the three CSV formats, windows, and the shipped trace extract.

:meth:`Workload.from_csv` reads three formats (pandas; loading is never in a hot path):

- ``"itp"``: Microsoft ITP traces (microsoft/elasticflow-traces): ``job_id, submission_time, duration,
  num_gpu``, sorted by submission time;
- ``"philly"``: the flattened Philly trace (Jeon et al., ATC 2019): ``timestamp, duration, num_gpus[,
  gpu_time, cluster]``; wall-clock timestamps in any order, converted to seconds after the first submission
  and sorted stably; job names are ``"<cluster>-<row>"`` (the trace has no job id);
- ``"canonical"``: ``job_id, submit_time, num_gpus, duration`` plus optional ``model, batch_size, seq_len,
  group``, sorted by submit time.

``duration`` is the recorded run time in seconds at the recorded GPU count. Job ids become ``name``;
``job_id`` is the position in the loaded workload (0, 1, ...). Times are shifted so that the first loaded
job arrives at 0 and then divided by ``load_scale`` (2 halves every inter-arrival time, doubling the load).

Malformed files raise :class:`~frenzy_env.errors.TraceFormatError` naming the file, the 1-based data row and
the column. :func:`data_path` finds the files shipped in ``frenzy_env/data`` (:data:`ITP_EXTRACT`).
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from frenzy_env.errors import ConfigError, TraceFormatError, unknown_name
from frenzy_env.paths import PACKAGE_DATA
from frenzy_env.world.models import get_model

MAX_GPUS_PER_JOB = 100_000  # larger recorded GPU counts are rejected as absurd

FORMATS: dict[str, tuple[str, ...]] = {  # required columns per trace format
    "itp": ("job_id", "submission_time", "duration", "num_gpu"),
    "philly": ("timestamp", "duration", "num_gpus"),
    "canonical": ("job_id", "submit_time", "num_gpus", "duration"),
}
CANONICAL_OPTIONAL: tuple[str, ...] = ("model", "batch_size", "seq_len", "group")
_TIME_COL = {"itp": "submission_time", "philly": "timestamp", "canonical": "submit_time"}
_GPU_COL = {"itp": "num_gpu", "philly": "num_gpus", "canonical": "num_gpus"}

#: Shipped default trace (inside the package; see frenzy_env/data/ATTRIBUTION.md).
ITP_EXTRACT = "itp_cluster02_extract.csv"


def data_path(name: str) -> Path:
    """Path of a data file shipped in ``frenzy_env/data``."""
    return PACKAGE_DATA / name


@dataclass(frozen=True)
class TraceTable:
    """Validated trace columns (numpy), before windowing and model assignment."""

    path: str
    format: str
    names: np.ndarray  # (n,) object: original ids
    submit: np.ndarray  # (n,) float64 seconds, non-decreasing
    gpus: np.ndarray  # (n,) int64
    duration: np.ndarray  # (n,) float64 seconds
    model: tuple | None = None  # (n,) ModelSpec | None (canonical only)
    batch: tuple | None = None  # (n,) int | None
    seq: tuple | None = None  # (n,) int | None
    group: tuple | None = None  # (n,) int | None
    rows: np.ndarray | None = None  # (n,) 1-based data row of each job in the file (error messages)

    def take(self, idx: np.ndarray) -> TraceTable:
        def pick(col):
            return None if col is None else tuple(col[i] for i in idx.tolist())

        return dataclasses.replace(
            self,
            names=self.names[idx],
            submit=self.submit[idx],
            gpus=self.gpus[idx],
            duration=self.duration[idx],
            model=pick(self.model),
            batch=pick(self.batch),
            seq=pick(self.seq),
            group=pick(self.group),
            rows=None if self.rows is None else self.rows[idx],
        )

    def window(
        self, *, start: float | None, end: float | None, max_jobs: int | None, load_scale: float
    ) -> TraceTable:
        if not (isinstance(load_scale, (int, float)) and math.isfinite(load_scale) and load_scale > 0):
            raise ConfigError(f"load_scale must be a positive number, got {load_scale!r}")
        return self.rows_from_zero(self.window_rows(start=start, end=end, max_jobs=max_jobs), load_scale)

    def rows_from_zero(self, idx: np.ndarray, load_scale: float = 1.0) -> TraceTable:
        """The rows ``idx`` (ascending positions), times shifted so that the first arrives at 0 and divided by
        ``load_scale``."""
        out = self.take(idx)
        return dataclasses.replace(out, submit=(out.submit - out.submit[0]) / float(load_scale))

    def window_rows(self, *, start: float | None, end: float | None, max_jobs: int | None) -> np.ndarray:
        """(n,) positions of the window's rows: ``start <= submit < end``, the first ``max_jobs`` of them; a
        contiguous ascending range (the times are sorted). Raises ConfigError for a bad window or an empty one."""
        if max_jobs is not None and (int(max_jobs) != max_jobs or max_jobs < 1):
            raise ConfigError(f"max_jobs must be a positive integer, got {max_jobs!r}")
        if start is not None and end is not None and not start < end:
            raise ConfigError(f"start must be before end, got start={start}, end={end}")
        keep = np.ones(self.submit.size, dtype=bool)
        if start is not None:
            keep &= self.submit >= start
        if end is not None:
            keep &= self.submit < end
        idx = np.flatnonzero(keep)
        if max_jobs is not None:
            idx = idx[: int(max_jobs)]
        if idx.size == 0:
            raise ConfigError(
                f"{self.path}: no jobs in the window start={start}, end={end} "
                f"(the trace spans {self.submit[0]:.0f} to {self.submit[-1]:.0f} s)"
            )
        return idx

    def gpu_count_error(self, job: int | None, message: str) -> TraceFormatError:
        """The error for a recorded GPU count of job ``job`` (a position in this table, or None): it names the
        file, the job's 1-based data row (when known) and the GPU-count column."""
        row = None if job is None or self.rows is None else int(self.rows[job])
        return _bad(self.path, row, _GPU_COL[self.format], message)

def _file_key(path: str | os.PathLike) -> tuple[str, int, int]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"trace file not found: {p}")
    st = p.stat()
    return str(p), st.st_mtime_ns, st.st_size


@lru_cache(maxsize=16)
def _read_trace_cached(path: str, mtime_ns: int, size: int, format: str) -> TraceTable:
    return read_trace(path, format=format)


def read_trace_cached(path: str | os.PathLike, *, format: str = "canonical") -> TraceTable:
    """:func:`read_trace`, cached on the file's path, modification time and size (tables are immutable)."""
    return _read_trace_cached(*_file_key(path), format)


def _bad(path: str, row: int | None, column: str | None, what: str) -> TraceFormatError:
    where = ", ".join(
        x for x in (f"row {row}" if row is not None else "", f"column {column!r}" if column else "") if x
    )
    return TraceFormatError(f"{path}: {where + ': ' if where else ''}{what}")


def _parser_error(path: str, message: str) -> TraceFormatError:
    """A pandas tokenizer error as a :class:`TraceFormatError` naming the row."""
    import re

    fields = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", message)
    if fields:  # pandas counts file lines from 1, the header included
        expected, line, saw = (int(x) for x in fields.groups())
        return _bad(path, line - 1, None, f"{saw} comma-separated fields, the header has {expected}")
    quote = re.search(r"EOF inside string starting at row (\d+)", message)
    if quote:  # pandas counts rows from 0, the header included
        return _bad(path, int(quote.group(1)), None, "a quoted field is never closed (unbalanced '\"')")
    return _bad(path, None, None, f"cannot parse as CSV: {message.strip()}")


def _numeric(df, col: str, path: str):
    """Column ``col`` as float64; a non-numeric or missing value raises naming its row."""
    import pandas as pd

    raw = df[col]
    vals = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(vals)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        v = str(raw.iloc[r]).strip()
        if v == "" or v.lower() in ("nan", "na", "n/a", "null", "none"):
            raise _bad(path, r + 1, col, f"missing value ({v or 'empty'})")
        raise _bad(path, r + 1, col, f"not a finite number: {v!r}")
    return vals


def _positive_int(df, col: str, path: str, upper: int | None = None) -> np.ndarray:
    vals = _numeric(df, col, path)
    bad = (vals < 1) | (vals != np.floor(vals))
    if upper is not None:
        bad |= vals > upper
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        limit = f" and at most {upper:,}" if upper is not None else ""
        raise _bad(path, r + 1, col, f"must be a positive integer{limit}, got {df[col].iloc[r]!r}")
    return vals.astype(np.int64)


def _optional(df, col: str, path: str, kind: str) -> tuple | None:
    if col not in df.columns:
        return None
    out: list = []
    for r, v in enumerate(df[col].tolist()):
        v = v.strip()
        if v == "" or v.lower() == "nan":
            out.append(None)
            continue
        if kind == "model":
            try:
                out.append(get_model(v))
            except ValueError as exc:
                raise _bad(path, r + 1, col, str(exc)) from None
            continue
        try:
            x = float(v)
        except ValueError:
            raise _bad(path, r + 1, col, f"not a number: {v!r}") from None
        if not math.isfinite(x) or x != int(x) or (x < 0 if kind == "group" else x < 1):
            need = "a non-negative integer" if kind == "group" else "a positive integer"
            raise _bad(path, r + 1, col, f"must be {need}, got {v!r}")
        out.append(int(x))
    return tuple(out)


def read_trace(path: str | os.PathLike, *, format: str = "canonical") -> TraceTable:
    """Read and validate a whole trace file (no window, no assignment). See :meth:`Workload.from_csv`."""
    path = str(path)
    if format not in FORMATS:
        raise unknown_name("trace format", format, FORMATS)
    text = _decode(path, Path(path).read_bytes())
    _check_layout(path, text)
    df = _read_columns(path, text, format)
    rows = np.arange(1, len(df) + 1)  # (n,) 1-based data rows
    duration = _numeric(df, "duration", path)
    nonpos = duration <= 0
    if nonpos.any():
        r = int(np.flatnonzero(nonpos)[0])
        raise _bad(
            path, r + 1, "duration", f"must be a positive number of seconds, got {df['duration'].iloc[r]!r}"
        )
    gpus = _positive_int(df, _GPU_COL[format], path, upper=MAX_GPUS_PER_JOB)
    if format == "philly":
        return _philly_table(path, df, gpus, duration, rows)
    tcol = _TIME_COL[format]
    submit = _numeric(df, tcol, path)
    back = np.flatnonzero(np.diff(submit) < 0)
    if back.size:
        r = int(back[0]) + 1  # 0-based index of the first row earlier than its predecessor
        raise _bad(
            path,
            r + 1,
            tcol,
            f"times must be sorted; {submit[r]:g} is earlier than row {r}'s {submit[r - 1]:g}",
        )
    names = _job_ids(path, df)
    if format == "itp":
        return TraceTable(path, format, names, submit, gpus, duration, rows=rows)
    return TraceTable(
        path,
        format,
        names,
        submit,
        gpus,
        duration,
        model=_optional(df, "model", path, "model") or (None,) * len(df),
        batch=_optional(df, "batch_size", path, "int") or (None,) * len(df),
        seq=_optional(df, "seq_len", path, "int") or (None,) * len(df),
        group=_optional(df, "group", path, "group"),
        rows=rows,
    )


def _decode(path: str, data: bytes) -> str:
    """The file's bytes as text; a byte-order mark (Excel's "CSV UTF-8") is dropped, bytes that are not UTF-8
    raise naming their row and offset."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n")  # 0: the header
        raise _bad(
            path,
            line or None,
            None,
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}"
            + (" (in the header)" if line == 0 else ""),
        ) from None


def _check_layout(path: str, text: str) -> None:
    """A header row, comma-separated (not ';' or tab), and a data row after it."""
    lines = text.splitlines()
    header = lines[0] if lines else ""
    second = next((ln for ln in lines[1:] if ln.strip()), "")
    if not header.strip():
        raise _bad(path, None, None, "empty file: no header row")
    for delim, label in ((";", "';'"), ("\t", "a tab")):
        if delim in header and header.count(delim) >= header.count(","):
            raise _bad(path, None, None, f"uses {label} as the delimiter; expected comma-separated values")
    if not second.strip():
        raise _bad(path, None, None, "empty file: a header but no data rows")


def _read_columns(path: str, text: str, format: str):
    """The CSV as a frame of strings with stripped column names, holding every column ``format`` needs and at
    least one row."""
    import pandas as pd

    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.ParserError as exc:
        raise _parser_error(path, str(exc)) from None
    df.columns = [str(c).strip() for c in df.columns]
    required = FORMATS[format]
    for col in required:
        if col not in df.columns:
            raise _bad(
                path,
                None,
                col,
                f"missing column (format {format!r} needs {', '.join(required)}; "
                f"found {', '.join(df.columns)})",
            )
    if len(df) == 0:
        raise _bad(path, None, None, "empty file: a header but no data rows")
    return df


def _philly_table(path: str, df, gpus: np.ndarray, duration: np.ndarray, rows: np.ndarray) -> TraceTable:
    """A Philly trace's table: date-time submissions as seconds after the first, jobs in submission order (a
    stable sort), named ``CLUSTER-ROW``."""
    import pandas as pd

    tcol = _TIME_COL["philly"]
    raw = df[tcol].str.strip()
    ts = pd.to_datetime(raw, errors="coerce", format="%Y-%m-%d %H:%M:%S")
    if ts.isna().any():
        ts = pd.to_datetime(raw, errors="coerce", format="mixed")
    if ts.isna().any():
        r = int(np.flatnonzero(ts.isna().to_numpy())[0])
        raise _bad(path, r + 1, tcol, f"not a date-time: {df[tcol].iloc[r]!r}")
    secs = (ts - ts.min()).dt.total_seconds().to_numpy(dtype=np.float64)
    order = np.argsort(secs, kind="stable")
    cl = df["cluster"].str.strip().tolist() if "cluster" in df.columns else ["philly"] * len(df)
    names = np.array([f"{c}-{r + 1}" for r, c in enumerate(cl)], dtype=object)
    return TraceTable(
        path, "philly", names[order], secs[order], gpus[order], duration[order], rows=rows[order]
    )


def _job_ids(path: str, df) -> np.ndarray:
    """The ``job_id`` column, stripped: (n,) object array; a missing or repeated id raises naming its row."""
    ids = df["job_id"].str.strip()
    empty = (ids == "").to_numpy()
    if empty.any():
        raise _bad(path, int(np.flatnonzero(empty)[0]) + 1, "job_id", "missing job id")
    dup = ids.duplicated(keep="first").to_numpy()
    if dup.any():
        r = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero((ids == ids.iloc[r]).to_numpy())[0])
        raise _bad(path, r + 1, "job_id", f"duplicate job id {ids.iloc[r]!r} (first at row {first + 1})")
    return ids.to_numpy(dtype=object)
