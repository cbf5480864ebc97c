"""The logic of the csv_stats plugin, in plain Python (no WIT bindings).

`summary` and `query` take the tool's arguments as a dict and return the
result text; a problem with the input raises `InputError`, which app.py turns
into the WIT `plugin-error` (`invalid-input`). Runs under any CPython 3.11+,
so the unit tests (test_csvstats.py) run on the host.
"""

import csv
import heapq
import io
import itertools
import json
import math
import re
from collections import Counter, deque
from array import array

# Cells that count as missing values, compared after stripping blanks.
MISSING = frozenset(["", "na", "n/a", "nan", "null", "none", "-"])

MAX_CSV_BYTES = 8 << 20       # also the schema's maxLength (characters)
MAX_COLUMNS = 1000
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
MAX_RESULT_CHARS = 512 * 1024  # half the host's default output limit (output_kib = 1024)
DEFAULT_TOP = 5
MAX_TOP = 50

_NUM = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?")
_BOOL = frozenset(["true", "false", "yes", "no"])
# MISSING in every mix of upper and lower case, so that a set lookup decides.
_MISSING_CASES = frozenset(
    "".join(p) for m in MISSING for p in itertools.product(*({ch.lower(), ch.upper()} for ch in m))
)
CHUNK_CELLS = 65_536  # cells handled at once; rows in a chunk = CHUNK_CELLS // columns
MAX_DISTINCT = 200_000  # distinct values counted, all text columns together (about 100 bytes each)


class InputError(Exception):
    """Arguments that the model should change; the message says how."""


# ---------------------------------------------------------------------------
# Tool descriptions and schemas

_CSV_PROPS = {
    "csv": {
        "type": "string",
        "description": "The CSV text, header row first unless has_header is false.",
        "maxLength": MAX_CSV_BYTES,
    },
    "delimiter": {
        "type": "string",
        "description": "The field separator: one character such as ',', ';', '|' or '\\t'. "
        "Default: guessed from the first lines.",
        "minLength": 1,
        "maxLength": 2,
    },
    "has_header": {
        "type": "boolean",
        "description": "Whether the first row names the columns (default true). "
        "Without a header the columns are column_1, column_2, ...",
    },
}

TOOLS = [
    {
        "name": "csv_summary",
        "description": (
            "Summarize CSV data: the number of rows and, for every column, a type guess "
            "(integer, number, boolean, date, text or empty), the count of missing cells, "
            "min/max/mean/median/stdev/sum for numeric columns, first/last for date columns, "
            "and the distinct count with the most frequent values for text columns. "
            "Missing cells are empty, NA, N/A, NaN, null, none or '-'."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                **_CSV_PROPS,
                "top": {
                    "type": "integer",
                    "description": f"How many most frequent values to list for each text column (default {DEFAULT_TOP}, 0 for none).",
                    "minimum": 0,
                    "maximum": MAX_TOP,
                },
            },
            "required": ["csv"],
            "additionalProperties": False,
        },
    },
    {
        "name": "csv_query",
        "description": (
            "Select rows of CSV data: keep the rows that match every condition in `where`, "
            "optionally sort them, keep some columns, and return at most `limit` rows (after "
            "skipping `offset`) as CSV (default) or JSON; a result stops at 512 KiB. "
            "Comparisons are numeric when both sides are numbers, otherwise text; contains/starts_with/ends_with ignore case; 'empty' and "
            "'not_empty' take no value."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                **_CSV_PROPS,
                "where": {
                    "type": "array",
                    "description": "Conditions that a row must all meet (AND).",
                    "items": {
                        "type": "object",
                        "properties": {
                            "column": {"type": "string", "description": "A column name from the header."},
                            "op": {
                                "type": "string",
                                "enum": ["=", "!=", "<", "<=", ">", ">=", "contains", "starts_with",
                                         "ends_with", "in", "empty", "not_empty"],
                            },
                            "value": {
                                "description": "What to compare with: a string or number; for 'in', an array of them.",
                                "type": ["string", "number", "boolean", "array"],
                            },
                        },
                        "required": ["column", "op"],
                        "additionalProperties": False,
                    },
                    "maxItems": 32,
                },
                "select": {
                    "type": "array",
                    "description": "The columns to return, in this order (default: all).",
                    "items": {"type": "string"},
                    "maxItems": MAX_COLUMNS,
                },
                "sort_by": {"type": "string", "description": "A column to sort the matching rows by (numbers numerically, missing cells last)."},
                "descending": {"type": "boolean", "description": "Sort from largest to smallest (default false)."},
                "offset": {
                    "type": "integer",
                    "description": "Matching rows to skip first, to page through a large result (default 0).",
                    "minimum": 0,
                },
                "limit": {
                    "type": "integer",
                    "description": f"The most rows to return (default {DEFAULT_LIMIT}).",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                },
                "format": {"type": "string", "enum": ["csv", "json"], "description": "Result format (default csv)."},
            },
            "required": ["csv"],
            "additionalProperties": False,
        },
    },
]


# ---------------------------------------------------------------------------
# Parsing
#
# The rows are streamed from the text, never held all at once: a Python
# component pays for every object in its linear memory (the plugin's
# memory_mib), and a list of rows of small strings takes about ten times the
# CSV's size.

class Table:
    """The CSV of `args`: its header, and its rows as often as needed."""

    def __init__(self, args):
        text = args.get("csv", "")
        if not isinstance(text, str):
            raise InputError("csv must be a string")
        if len(text) > MAX_CSV_BYTES:
            raise InputError(f"csv is {len(text)} characters; at most {MAX_CSV_BYTES} are accepted")
        if text.startswith("\ufeff"):
            text = text[1:]
        if not text.strip():
            raise InputError("csv is empty: pass the CSV text, header row first")
        self.text = text
        self.delimiter = _delimiter(args, text)
        csv.field_size_limit(MAX_CSV_BYTES)
        first = next(self._records(), None)
        if first is None:
            raise InputError("csv has no rows")
        self.has_header = args.get("has_header", True)
        if self.has_header:
            self.header = _names(first)
        else:
            self.header = [f"column_{i + 1}" for i in range(len(first))]
        if len(self.header) > MAX_COLUMNS:
            raise InputError(f"csv has {len(self.header)} columns; at most {MAX_COLUMNS} are supported")
        self.ragged = 0

    def _records(self):
        # strict: a stray or unterminated quote is an error naming the line,
        # rather than a field that silently swallows the rest of the file.
        reader = csv.reader(_lines(self.text), delimiter=self.delimiter, strict=True)
        try:
            for r in reader:
                if r:
                    yield r
        except csv.Error as e:
            raise InputError(f"csv is not valid CSV (line {reader.line_num}): {e}; "
                             "quote fields that contain the delimiter, quotes or line breaks, "
                             "and double the quotes inside them") from None

    def rows(self):
        """Every data row, padded or cut to the header's width."""
        width = len(self.header)
        self.ragged = 0
        records = self._records()
        if self.has_header:
            next(records)
        for r in records:
            if len(r) != width:
                self.ragged += 1
                r = (r + [""] * width)[:width]
            yield r

    def notes(self):
        notes = []
        if self.ragged:
            notes.append(f"{self.ragged} row(s) had a different number of fields than the header; "
                         "they were padded or cut")
        if self.delimiter != ",":
            notes.append(f"delimiter: {self.delimiter!r}")
        return notes

    def column(self, name, what):
        header = self.header
        if name in header:
            return header.index(name)
        folded = [h for h in header if h.lower() == str(name).lower()]
        if len(folded) == 1:
            return header.index(folded[0])
        shown = ", ".join(header[:50]) + (" ..." if len(header) > 50 else "")
        raise InputError(f"{what}: no column named {name!r}; the columns are: {shown}")


def _lines(text):
    """The lines of text, line ends kept, without copying it whole."""
    sep = "\n" if "\n" in text or "\r" not in text else "\r"  # old Mac files end lines with \r alone
    start, n = 0, len(text)
    while start < n:
        end = text.find(sep, start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end + 1]
        start = end + 1


def _delimiter(args, text):
    d = args.get("delimiter")
    if d is not None:
        if d in ("\\t", "tab"):
            return "\t"
        if len(d) != 1:
            raise InputError(f"delimiter must be one character (or '\\t'), got {d!r}")
        if d in "\r\n\"":
            raise InputError(f"delimiter cannot be {d!r}")
        return d
    # The candidate that splits the first lines into the most consistent
    # number of fields (at least two), then the most fields; ',' on a tie.
    sample = list(itertools.islice(_lines(text), 20))
    best, choice = (0.0, 1), ","
    for d in ",;\t|":
        try:
            rows = [r for r in csv.reader(sample, delimiter=d) if r]
        except csv.Error:
            continue
        if not rows or len(rows[0]) < 2:
            continue
        width = len(rows[0])
        score = (sum(len(r) == width for r in rows) / len(rows), width)
        if score > best:
            best, choice = score, d
    return choice


def _names(first):
    names, seen = [], set()
    for i, name in enumerate(first):
        name = name.strip() or f"column_{i + 1}"
        base, n = name, 2
        while name in seen:
            name = f"{base}_{n}"
            n += 1
        seen.add(name)
        names.append(name)
    return names


def _missing(cell):
    """Whether a stripped cell counts as missing."""
    return cell in _MISSING_CASES


def _number(cell):
    """The stripped cell as a finite float, or None. Also takes 1,234.5 and 12%."""
    try:
        v = float(cell)
    except ValueError:
        s = cell.replace("_", "")
        if s.endswith("%"):
            s = s[:-1]
        if "," in s and _THOUSANDS.fullmatch(s):
            s = s.replace(",", "")
        if not _NUM.fullmatch(s):
            return None
        v = float(s)
    return v if math.isfinite(v) else None


_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?")


# ---------------------------------------------------------------------------
# csv_summary

def _round(x):
    if x is None:
        return None
    if float(x).is_integer() and abs(x) < 2**53:
        return int(x)
    return float(f"{x:.6g}") if abs(x) < 1e15 else x


def _floats(cells):
    """The cells as finite floats, or None if one is not a number."""
    try:
        values = list(map(float, cells))
    except ValueError:
        values = []
        for c in cells:
            v = _number(c)
            if v is None:
                return None
            values.append(v)
    return values if all(map(math.isfinite, values)) else None


def _chunks(table):
    """The rows in chunks, each as a list of columns: the per-cell work then
    runs in builtins (map, Counter) rather than in an interpreted loop, which
    matters twice over in a Python interpreter compiled to WebAssembly."""
    rows = table.rows()
    while True:
        chunk = list(itertools.islice(rows, max(1, CHUNK_CELLS // len(table.header))))
        if not chunk:
            return
        yield len(chunk), [[c for c in map(str.strip, col) if c not in _MISSING_CASES] for col in zip(*chunk)]


def summary(args):
    table = Table(args)
    top = args.get("top", DEFAULT_TOP)
    width = len(table.header)

    # Pass 1: which types the present cells of each column all fit.
    missing = [0] * width
    present = [0] * width
    is_int = [True] * width
    is_num = [True] * width
    is_bool = [True] * width
    is_date = [True] * width
    rows = 0
    for n, columns in _chunks(table):
        rows += n
        for i, cells in enumerate(columns):
            missing[i] += n - len(cells)
            present[i] += len(cells)
            if not cells:
                continue
            if is_num[i] and _floats(cells) is None:
                # Also for integers: one too large for a float (1e400) would
                # break the statistics, so its column is text.
                is_num[i] = is_int[i] = False
            if is_int[i]:
                try:
                    deque(map(int, cells), maxlen=0)  # converts every cell, keeps none
                except ValueError:
                    is_int[i] = False
            if is_bool[i]:
                is_bool[i] = set(map(str.lower, cells)) <= _BOOL
            if is_date[i]:
                is_date[i] = all(map(_DATE.fullmatch, cells))
    kinds = []
    for i in range(width):
        if not present[i]:
            kinds.append("empty")
        elif is_int[i]:
            kinds.append("integer")
        elif is_num[i]:
            kinds.append("number")
        elif is_bool[i]:
            kinds.append("boolean")
        elif is_date[i]:
            kinds.append("date")
        else:
            kinds.append("text")

    # Pass 2: what each kind reports. Numbers go into arrays of doubles
    # (8 bytes each, not a 32-byte float object); distinct values are counted
    # up to a share of MAX_DISTINCT per column (at least 1000), after which
    # the column's counting stops.
    nums = {i: array("d") for i, k in enumerate(kinds) if k in ("integer", "number")}
    counts = {i: Counter() for i, k in enumerate(kinds) if k in ("text", "boolean", "date")}
    counted = dict.fromkeys(counts, 0)
    cap = max(1000, MAX_DISTINCT // len(counts)) if counts else 0
    spans = {i: [None, None] if kinds[i] == "date" else [math.inf, 0] for i in counts}
    if nums or counts:
        for n, columns in _chunks(table):
            for i, values in nums.items():
                if columns[i]:
                    values.extend(_floats(columns[i]))
            for i, seen in counts.items():
                cells = columns[i]
                if not cells:
                    continue
                span = spans[i]
                if kinds[i] == "date":  # ISO dates sort as text
                    lo, hi = min(cells), max(cells)
                    if span[0] is None or lo < span[0]:
                        span[0] = lo
                    if span[1] is None or hi > span[1]:
                        span[1] = hi
                else:
                    lengths = list(map(len, cells))
                    span[0] = min(span[0], min(lengths))
                    span[1] = max(span[1], max(lengths))
                if len(seen) <= cap:
                    seen.update(cells)
                    counted[i] += n

    columns = []
    for i, name in enumerate(table.header):
        col = {"name": name, "type": kinds[i], "missing": missing[i]}
        if i in nums:
            values = sorted(nums.pop(i))
            n = len(values)
            # math.fsum rather than the statistics module: statistics.stdev
            # sums exact fractions, about 2.5 times slower, which a
            # WebAssembly interpreter multiplies again.
            mean = math.fsum(values) / n
            mid = n // 2
            median = values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2
            stdev = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1)) if n > 1 else None
            col.update(min=_round(values[0]), max=_round(values[-1]), mean=_round(mean),
                       median=_round(median), stdev=_round(stdev), sum=_round(math.fsum(values)))
        elif i in counts:
            seen = counts.pop(i)
            if len(seen) > cap:
                col["distinct"] = f"more than {cap}"
                col["counted_rows"] = counted[i]  # the top values are of these rows only
            else:
                col["distinct"] = len(seen)
            if kinds[i] == "date":
                col.update(first=spans[i][0], last=spans[i][1])
            else:
                if top:
                    common = sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
                    col["top"] = [{"value": v, "count": c} for v, c in common]
                col["length"] = {"min": spans[i][0], "max": spans[i][1]}
        columns.append(col)
    out = {"rows": rows, "columns": columns}
    notes = table.notes()
    if notes:
        out["notes"] = notes
    return _dump(out)


# ---------------------------------------------------------------------------
# csv_query

def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _comparer(value):
    """A function cell -> -1, 0 or 1 comparing a stripped cell with value:
    numerically when both are numbers, otherwise as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        b = float(value)
    else:
        b = _number(_text(value).strip())
    y = _text(value).strip()

    def compare(cell):
        if b is not None:
            a = _number(cell)
            if a is not None:
                return (a > b) - (a < b)
        return (cell > y) - (cell < y)

    return compare


def _matcher(cond, table):
    col = table.column(cond.get("column"), "where")
    op = cond.get("op")
    value = cond.get("value")
    if op in ("empty", "not_empty"):
        want = op == "empty"
        return lambda r: _missing(r[col].strip()) == want
    if "value" not in cond:
        raise InputError(f"where: the condition on {cond.get('column')!r} with op {op!r} needs a value")
    if op == "in":
        if not isinstance(value, list):
            raise InputError("where: op 'in' needs an array value, e.g. [\"a\", \"b\"]")
        compares = [_comparer(v) for v in value]
        return lambda r: any(c(r[col].strip()) == 0 for c in compares)
    if isinstance(value, list):
        raise InputError(f"where: op {op!r} needs a single value, not an array (use 'in')")
    if op in ("contains", "starts_with", "ends_with"):
        needle = _text(value).lower()
        test = {"contains": str.__contains__, "starts_with": str.startswith, "ends_with": str.endswith}[op]
        return lambda r: test(r[col].strip().lower(), needle)
    tests = {
        "=": lambda c: c == 0,
        "!=": lambda c: c != 0,
        "<": lambda c: c < 0,
        "<=": lambda c: c <= 0,
        ">": lambda c: c > 0,
        ">=": lambda c: c >= 0,
    }
    if op not in tests:
        raise InputError(f"where: unknown op {op!r}")
    test, compare = tests[op], _comparer(value)
    if op in ("<", "<=", ">", ">="):
        # Ordering never matches a missing cell.
        def ordered(r):
            cell = r[col].strip()
            return not _missing(cell) and test(compare(cell))
        return ordered
    return lambda r: test(compare(r[col].strip()))


def _sort_key(col, descending):
    """Numbers by value, then text ignoring case, then missing cells; with
    `descending`, numbers and text are reversed and missing cells stay last."""
    rank_missing, rank_text, rank_num = (-1, 0, 1) if descending else (2, 1, 0)

    def key(r):
        cell = r[col].strip()
        if _missing(cell):
            return (rank_missing, 0.0, "")
        x = _number(cell)
        if x is not None:
            return (rank_num, x, "")
        return (rank_text, 0.0, cell.lower())

    return key


def query(args):
    table = Table(args)
    matchers = [_matcher(c, table) for c in args.get("where") or []]
    select = args.get("select")
    cols = [table.column(s, "select") for s in select] if select else list(range(len(table.header)))
    offset = args.get("offset", 0)
    limit = args.get("limit", DEFAULT_LIMIT)
    sort_col = table.column(args["sort_by"], "sort_by") if args.get("sort_by") is not None else None

    total = matched = 0

    def matching():
        nonlocal total, matched
        for r in table.rows():
            total += 1
            if all(m(r) for m in matchers):
                matched += 1
                yield r

    if sort_col is None:
        kept = []
        for r in matching():
            if offset < matched <= offset + limit:
                kept.append(r)
    else:
        desc = bool(args.get("descending", False))
        pick = heapq.nlargest if desc else heapq.nsmallest
        kept = pick(offset + limit, matching(), key=_sort_key(sort_col, desc))[offset:]

    # Rows go out until the result would pass MAX_RESULT_CHARS.
    names = [table.header[i] for i in cols]
    as_json = args.get("format", "csv") == "json"
    lines = [_csv_line(names)] if not as_json else []
    size = len(lines[0]) if lines else 0
    for r in kept:
        values = [r[i] for i in cols]
        line = json.dumps(dict(zip(names, values)), ensure_ascii=False) if as_json else _csv_line(values)
        size += len(line) + 4
        if size > MAX_RESULT_CHARS:
            break
        lines.append(line)
    returned = len(lines) - (0 if as_json else 1)
    notes = table.notes()
    if returned < len(kept):
        notes.append(f"stopped after {returned} row(s) to keep the result under {MAX_RESULT_CHARS // 1024} KiB: "
                     "select fewer columns, narrow where, or page with offset")
    elif offset + returned < matched:
        notes.append(f"{matched - offset - returned} more matching row(s): raise limit or page with "
                     f"offset {offset + returned}")
    if as_json:
        out = {"matched": matched, "offset": offset, "returned": returned, "rows": _Raw(lines)}
        if notes:
            out["notes"] = notes
        return _dump(out)
    summary_line = f"# {matched} of {total} row(s) matched"
    if offset or returned < matched:
        summary_line += f"; rows {offset + 1} to {offset + returned} shown" if returned else "; none shown"
    return "\n".join(lines) + "\n" + summary_line + "".join(f"\n# {n}" for n in notes)


class _Raw(list):
    """Items already in JSON, for _dump."""


def _dump(obj):
    """JSON of a dict: a key per line, and the items of a list value one per
    line, each on a single line: easy to read, without the many short lines
    of json.dumps(indent=...)."""
    parts = []
    for key, value in obj.items():
        name = json.dumps(key)
        if isinstance(value, list) and value:
            items = value if isinstance(value, _Raw) else [json.dumps(v, ensure_ascii=False) for v in value]
            parts.append(f" {name}: [\n" + ",\n".join("  " + item for item in items) + "\n ]")
        else:
            parts.append(f" {name}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(parts) + "\n}"


def _csv_line(values):
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(values)
    return buf.getvalue()


def schemas():
    """(name, description, schema JSON text) of every tool."""
    return [(t["name"], t["description"], json.dumps(t["input_schema"])) for t in TOOLS]


TOOL_NAMES = frozenset(t["name"] for t in TOOLS)


def call(name, args):
    """Runs tool `name` (one of TOOL_NAMES) with its arguments."""
    if name == "csv_summary":
        return summary(args)
    if name == "csv_query":
        return query(args)
    raise ValueError(f"unknown tool {name!r}")
