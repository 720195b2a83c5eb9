"""The paired statistics and the verdict rule of ``frenzy reproduce``: per-seed differences between two
policies' runs, their 95% interval (the range of the values below :data:`MIN_CI_N`), and each claim row's
verdict against the paper's number under one written rule (:data:`VERDICT_RULE`) with a one-line reason."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class ClaimRow:
    """One row of the claims table."""

    claim: str
    paper: str
    scenario: str
    ours: str = "not tested"
    verdict: str = "not tested"
    mean: float = math.nan
    ci95: float = math.nan
    n: int = 0
    detail: str = ""
    comparator: str = ""
    reason: str = ""
    kind: str = ""  # ROW_KINDS: "paper claim", "extension" or "control" ("": claim_kind decides)


def paired(a: list, b: list, fn: Callable[[dict, dict], float]) -> list[float]:
    """fn(a_seed, b_seed) for every seed where both ran."""
    return [fn(x, y) for x, y in zip(a, b) if x is not None and y is not None]


def reduction(metric: str) -> Callable[[dict, dict], float]:
    """Relative reduction of ``metric`` of the first policy against the second: 1 - a / b."""
    return lambda x, y: 1.0 - x[metric] / y[metric]


def fmt_ci(mean: float, half: float, pct: bool = False, unit: str = "") -> str:
    """``mean ± half`` as :func:`frenzy_env.evaluation.episodes.format_ci` does, in percent (``pct``) or with ``unit``
    after each number; "(n=1)" after a mean without an interval."""
    from frenzy_env.evaluation.episodes import format_ci

    if math.isnan(mean):
        return "not available"
    scale = 100.0 if pct else 1.0
    u = "%" if pct else unit
    if math.isnan(half):
        return f"{format_ci(mean * scale, half)}{u} (n=1)"
    return " ± ".join(f"{part}{u}" for part in format_ci(mean * scale, half * scale).split(" ± "))


#: relative band around a paper's single value: a CI inside [v (1 - BAND), v (1 + BAND)] reproduces v
BAND = 0.25
#: fewest values (seeds or cases) whose t-interval a verdict uses; below it, the values' own range (two values
#: give a t-interval 12.7 half-widths wide, which contains nearly any paper's number)
MIN_CI_N = 3
#: what a row is: the paper's own claim, the project's extension (context, other settings, studies) or a control
ROW_KINDS = ("paper claim", "extension", "control")
#: the written rule of the verdicts (stated above the claims table and in docs/reproduce.md)
VERDICT_RULE = (
    "Verdicts compare our 95% CI with the paper's number (its setting and comparator are the row's). "
    f"\"reproduced\": the CI contains the paper's value, or lies within ±{BAND:.0%} of it (relative), and "
    "excludes no effect; for a range claim (12-18%) the CI overlaps the range; for a claim with no number "
    "(\"lower\", \"better\") the CI lies wholly on the claimed side of no effect. \"Up to X\" claims: the paper's "
    "maximum is compared as a value (42% ± 24% against \"up to 92%\" is \"same direction, smaller\"). Otherwise: "
    "\"same direction, smaller\" / \"same direction, larger\" (the CI excludes no effect and lies below / above the "
    "paper's value and its band), \"opposite\" (the CI lies wholly on the other side of no effect), \"no effect\" "
    "(the CI contains no effect and excludes the paper's value), \"inconclusive\" (the CI contains both), "
    "\"smaller\" / \"larger\" (plain values with no no-effect value, e.g. accuracy), \"not tested\" (no "
    "measurement; the reason says why). With fewer than 3 values (seeds or cases) the range of the values stands "
    "in for the CI: a t-interval over 2 values is too wide to tell anything. The kind column says whose claim a "
    "row is: \"paper claim\" rows are the papers' own; \"extension\" rows (context comparators, other settings, "
    "the rankings study, our estimator, cases outside a paper's scope) and \"control\" rows (no claim) are never "
    "counted as the paper's."
)


def _interval(values: list[float]) -> tuple[float, float, bool]:
    """(mean, half-width, is_range): the t-distribution 95% interval, or for 2 values (fewer than
    :data:`MIN_CI_N`) the midpoint and half of their range."""
    from frenzy_env.evaluation.episodes import confidence_interval

    if 2 <= len(values) < MIN_CI_N:
        a, b = min(values), max(values)
        return (a + b) / 2, (b - a) / 2, True
    mean, half = confidence_interval(values)
    return mean, half, False


def verdict(
    mean: float, half: float, lo: float, hi: float, null: float | None = 0.0,
    band: tuple[float, float] | None = None,
) -> str:
    """The verdict of our CI ``[mean - half, mean + half]`` against the paper (the rule: :data:`VERDICT_RULE`).

    The paper: a single value (``lo == hi``), a range (``lo < hi``) or a direction only (``hi`` infinite: "lower",
    "better", with no number; ``lo`` is then ignored). ``null`` is the value of "no effect" (0 for a reduction,
    the log of 1 for a log-ratio; None for plain values such as an accuracy). ``band``: the interval a CI may lie
    in to reproduce a single value (default ``v (1 - BAND)`` to ``v (1 + BAND)``; ranges have none). A half-width
    of NaN (one seed) is a point."""
    if math.isnan(mean):
        return "not tested"
    if math.isnan(half):
        half = 0.0
    a, b = mean - half, mean + half
    if not math.isfinite(hi):  # direction only
        if null is None:
            return "no claim"
        return "reproduced" if a > null else "opposite" if b < null else "inconclusive"
    if lo == hi and band is None:
        band = (min(lo * (1 - BAND), lo * (1 + BAND)), max(lo * (1 - BAND), lo * (1 + BAND)))
    hits = (a <= hi and b >= lo) or (band is not None and band[0] <= a and b <= band[1])
    if null is None:
        return "reproduced" if hits else "smaller" if b < lo else "larger"
    has_null = a <= null <= b
    if hits:
        return "inconclusive" if has_null else "reproduced"
    if has_null:
        return "no effect"
    claimed_up = hi > null  # the paper's effect lies above no effect
    if (mean < null) == claimed_up:
        return "opposite"
    smaller = b < lo if claimed_up else a > hi
    return "same direction, smaller" if smaller else "same direction, larger"


def reason(
    verdict_text: str, low: str, high: str, lo: str, hi: str, null: str, n: int, band: str = "",
    within_band: bool = False, is_range: bool = False,
) -> str:
    """One line saying why ``verdict_text`` follows from our CI [``low``, ``high``] over ``n`` seeds (or cases),
    the paper's value or range [``lo``, ``hi``] (``hi`` "any": a direction only), the no-effect value ``null``
    and the band around a single value (``band``, e.g. "43.5% to 72.5%"), all formatted; ``within_band``: a
    reproduced single value is not inside our CI, which lies within its band; ``is_range``: [``low``, ``high``]
    is the range of 2 values, not a CI (:data:`MIN_CI_N`)."""
    if n == 1:
        ours = f"our value {low} (n=1, no interval)"
    elif is_range:
        ours = f"the range of our {n} values, {low} to {high},"
    else:
        ours = f"our 95% CI {low} to {high} (n={n})"
    if hi == "any":
        paper = f"the paper's side of {null}"
        if verdict_text == "reproduced":
            return f"{ours} lies wholly on {paper}"
        if verdict_text == "opposite":
            return f"{ours} lies wholly on the other side of {null} from the paper's claim"
        if verdict_text == "inconclusive":
            return f"{ours} contains {null} (no effect): the direction is not established"
        return ""
    paper = f"the paper's {lo}" if lo == hi else f"the paper's range {lo} to {hi}"
    outside = f" and its ±{BAND:.0%} band ({band})" if band and lo == hi else ""
    if verdict_text == "reproduced":
        if lo != hi:
            return f"{ours} overlaps {paper}"
        return f"{ours} lies within ±{BAND:.0%} ({band}) of {paper}" if within_band else f"{ours} contains {paper}"
    if verdict_text == "inconclusive":
        return f"{ours} contains both {null} (no effect) and {paper}"
    if verdict_text == "no effect":
        return f"{ours} contains {null} (no effect) and excludes {paper}"
    if verdict_text == "opposite":
        return f"{ours} lies on the other side of {null} from {paper}"
    if verdict_text.endswith("smaller"):
        return f"{ours} lies below {paper}{outside}"
    if verdict_text.endswith("larger"):
        return f"{ours} lies above {paper}{outside}"
    return ""


def claim_kind(row: ClaimRow) -> str:
    """The kind (:data:`ROW_KINDS`) of a row that does not set its own: "control" for rows with no paper number
    ("not reported", "(control)"), "extension" for context rows, settings the paper did not run (doubling at
    low or extreme contention), the rankings study, A-SRPT's cold forest, and cases outside a paper's scope;
    otherwise "paper claim"."""
    text = f"{row.claim} | {row.paper}".lower()
    if row.verdict.startswith("control") or "(control)" in text or row.paper.strip().lower() == "not reported":
        return "control"
    marks = ("(context)", "not in the paper", ", ranking ", "moderate only", "paper's forest is trained",
             "outside the paper's scope", "low contention", "extreme contention")
    return "extension" if any(m in text for m in marks) else "paper claim"


def claim_from_values(
    row: ClaimRow, values: list[float], lo: float, hi: float, *, null: float | None = 0.0, pct: bool = True,
    unit: str = "", detail: str = "", log: bool = False, note: str = "",
) -> ClaimRow:
    """Fill ``row`` from per-seed ``values`` and the paper's value or range [lo, hi] (``log``: values are
    ratios, compared on a log scale).

    How the paper's number is read (:data:`VERDICT_RULE`): a range that starts at no effect (``lo`` within 1e-6 of
    ``null``, e.g. ``(1e-9, 1.0)`` for "lower") is a direction-only claim, unless the paper's text reads "up to
    X", whose maximum ``hi`` is compared as a single value. ``row.reason`` gets the one-line reason of the
    verdict (:func:`reason`), then ``note`` (a likely cause); ``row.kind`` defaults to :func:`claim_kind`."""
    from frenzy_env.evaluation.episodes import format_number

    if null is not None and row.paper.strip().lower().startswith("up to"):
        lo = hi  # "up to X": the paper's maximum as a value
    elif null is not None and abs(lo - null) <= 1e-6:
        hi = math.inf  # "lower", "better": a direction only
    if not values:
        row.detail = detail or row.detail
        row.verdict, row.ours = "not tested", "not tested"
        row.kind = row.kind or claim_kind(row)
        return row
    if log:  # a ratio: CI of the mean log-ratio, shown as a geometric mean and its interval
        mean, half, is_range = _interval(np.log(values).tolist())
        row.mean, row.ci95, row.n = math.exp(mean), half, len(values)
        h = 0.0 if math.isnan(half) else half
        low, high = format_number(math.exp(mean - h)), format_number(math.exp(mean + h))
        span = "n=1" if math.isnan(half) else f"range {low}-{high}" if is_range else f"95% CI {low}-{high}"
        row.ours = f"{format_number(math.exp(mean))}{unit} ({span})"
        bounds = (lo * (1 - BAND), hi * (1 + BAND)) if lo == hi and math.isfinite(hi) else None
        row.verdict = verdict(
            mean, half, math.log(lo), math.log(hi) if math.isfinite(hi) else math.inf,
            None if null is None else math.log(null),
            band=None if bounds is None else (math.log(bounds[0]), math.log(bounds[1])),
        )
        row.detail = detail
        band_text = "" if bounds is None else f"{format_number(bounds[0])}{unit} to {format_number(bounds[1])}{unit}"
        ratio = [f"{format_number(lo)}{unit}", f"{format_number(hi)}{unit}" if math.isfinite(hi) else "any",
                 f"{format_number(1.0 if null is None else null)}{unit}"]
        inside = not (mean - h <= math.log(lo) <= mean + h)
        row.reason = reason(row.verdict, low + unit, high + unit, *ratio, row.n, band=band_text, within_band=inside,
                            is_range=is_range)
    else:
        mean, half, is_range = _interval(values)
        row.mean, row.ci95, row.n = mean, half, len(values)

        def fmt(v: float) -> str:
            if not math.isfinite(v):
                return "any"
            return f"{format_number(round(v * 100, 9))}%" if pct else f"{format_number(v)}{unit}"

        row.ours = f"{fmt(min(values))} to {fmt(max(values))} (n=2, range)" if is_range else fmt_ci(
            mean, half, pct=pct, unit=unit)
        row.verdict = verdict(mean, half, lo, hi, null)
        row.detail = detail
        h = 0.0 if math.isnan(half) else half

        band_text = f"{fmt(lo * (1 - BAND))} to {fmt(lo * (1 + BAND))}" if lo == hi else ""
        row.reason = reason(
            row.verdict, fmt(mean - h), fmt(mean + h), fmt(lo), fmt(hi), fmt(null or 0.0), row.n, band=band_text,
            within_band=not (mean - h <= lo <= mean + h), is_range=is_range,
        )
    if note:
        row.reason = f"{row.reason}; {note}" if row.reason else note
    row.kind = row.kind or claim_kind(row)
    return row


def mean_of(runs: list, metric: str) -> str:
    """Mean ± 95% CI half-width of ``metric`` over the runs (:func:`frenzy_env.evaluation.episodes.format_ci`)."""
    from frenzy_env.evaluation.episodes import confidence_interval, format_ci

    vals = [r[metric] for r in runs if r is not None]
    if not vals:
        return "n/a"
    return format_ci(*confidence_interval(vals))


__all__ = [
    "ClaimRow", "paired", "reduction", "fmt_ci", "BAND", "MIN_CI_N", "ROW_KINDS", "VERDICT_RULE", "verdict", "reason",
    "claim_kind", "claim_from_values", "mean_of",
]
