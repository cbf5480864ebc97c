"""The logic of the pii_guard hook, in plain Python (no WIT bindings).

`Guard(config).redact(text)` finds e-mail addresses, phone numbers, IBANs
and payment card numbers in a tool's result and replaces each with a marker
(`[email]`, `[phone]`, `[iban]`, `[card]`). Numbers are checked before they
are hidden: cards by the Luhn checksum, IBANs by their mod-97 checksum, phone
numbers by their count of digits, so that ordinary numbers (ids, amounts,
dates) stay as they are. Runs under any CPython 3.11+, so the unit tests
(test_pii.py) run on the host.
"""

import re

KINDS = ("email", "phone", "iban", "card")

# One pattern with a named group per kind, scanned once over the text: a
# Python interpreter compiled to WebAssembly is several times slower than a
# native one, and a hook has a budget of milliseconds. Every repetition is
# bounded so that no input makes the scan slow down badly.
_PATTERN = re.compile(
    r"""
    (?P<email>
        (?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}
        @[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}\.){1,8}[A-Za-z]{2,24}\b
    )
  | (?P<iban>   # country, check digits, then up to 30 letters or digits, by fours or not
        \b[A-Z]{2}\d{2}(?:\ ?[A-Z0-9]{4}){2,7}(?:\ ?[A-Z0-9]{1,3})?\b
    )
  | (?P<card>   # 13 to 19 digits: 4-4-4-x or 4-6-5 (Amex), spaces or dashes, or none
        (?<![\d.-])  # not inside 12.34, -5 or a longer number
        (?:\d{4}(?P<s1>[\ -]?)\d{4}(?P=s1)\d{4}(?P=s1)\d{1,7}|\d{4}(?P<s2>[\ -]?)\d{6}(?P=s2)\d{5})
        (?!\d|\.\d)
    )
  | (?P<phone>
        (?<![\w+])\+\d[\d\ ().\-/]{6,22}\d(?!\d)     # international: +49 30 1234567, +1 (555) 123-4567
      | (?<![\w(])\(\d{2,5}\)\ ?\d{3,4}[\ .\-]?\d{3,4}(?!\d)        # (555) 123-4567, (030) 1234 567
      | (?<![\w.\-])\d{3}(?P<s3>[.\-])\d{3}(?P=s3)\d{4}(?![\w.\-]?\d)  # 555-123-4567, 555.123.4567
      | (?<![\w.\-/])0\d{1,4}[\ /\-]\d{3,4}[\ \-]?\d{2,5}(?![\w.\-/]?\d)  # 030 1234567, 0171/123 4567
    )
    """,
    re.VERBOSE,
)

_DIGIT = re.compile(r"\d")

# Digits a phone number may have, with its country code or leading 0.
_PHONE_DIGITS = range(8, 16)
_NATIONAL_DIGITS = range(9, 13)


class ConfigError(ValueError):
    """A setting in the [config] table that cannot be used; the message says which."""


def luhn_ok(digits):
    """Whether a string of digits passes the Luhn checksum (payment cards)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_ok(iban):
    """Whether a compact, upper-case IBAN passes its mod-97 checksum."""
    if not 15 <= len(iban) <= 34:
        return False
    moved = iban[4:] + iban[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


def _digits(text):
    return "".join(ch for ch in text if ch.isdigit())


def _longest(text, valid, separators=" "):
    """The length of the longest start of `text`, ending before a separator
    or at the end, that `valid` accepts; 0 if none. A pattern may take in a
    following word or number ("DE89... 2024", "+1 555 123 4567 12"): this
    keeps the part that checks out."""
    if valid(text):
        return len(text)
    for end in range(len(text) - 1, 0, -1):
        if text[end] in separators and text[end - 1] not in separators and valid(text[:end]):
            return end
    return 0


class Guard:
    """What to hide, read from the plugin's [config] table (a dict)."""

    def __init__(self, config):
        if not isinstance(config, dict):
            raise ConfigError("config must be a table")
        unknown = set(config) - {"tools", "kinds", "keep"}
        if unknown:
            raise ConfigError(f"unknown config key(s): {', '.join(sorted(unknown))}; "
                              "known: tools, kinds, keep")
        kinds = config.get("kinds", list(KINDS))
        if not isinstance(kinds, list) or not all(k in KINDS for k in kinds):
            raise ConfigError(f"config.kinds must be a list of {', '.join(KINDS)}; got {kinds!r}")
        self.kinds = frozenset(kinds)
        keep = config.get("keep", [])
        if not isinstance(keep, list) or not all(isinstance(k, str) and k for k in keep):
            raise ConfigError("config.keep must be a list of non-empty strings "
                              "(values, or '@domain' for every address of a domain)")
        # Compared without case (addresses) and without spaces (numbers).
        self.keep = frozenset(_canonical(k) for k in keep if not k.startswith("@"))
        self.keep_domains = tuple(k.lower() for k in keep if k.startswith("@"))

    def redact(self, text):
        """(new text, {kind: count}) with what was hidden; counts empty if nothing was."""
        counts = {}
        # Cheap exit: without '@' there is no address, without digits nothing else.
        if not self.kinds or ("@" not in text and not _DIGIT.search(text)):
            return text, counts

        def replace(m):
            kind = m.lastgroup  # the kind's group closes last, so it is the one named
            found = m.group(kind)
            if kind not in self.kinds:
                return found
            end = self._check(kind, found)
            if not end:
                return found
            value = found[:end]
            if self._kept(kind, value):
                return found
            counts[kind] = counts.get(kind, 0) + 1
            return f"[{kind}]" + found[end:]

        return _PATTERN.sub(replace, text), counts

    def _check(self, kind, found):
        """How much of `found` really is of `kind`: its length, a shorter
        start of it, or 0 for none."""
        if kind == "email":
            return len(found)
        if kind == "card":
            digits = _digits(found)
            # All one digit (0000 0000 0000 0000) passes Luhn but is filler.
            ok = 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn_ok(digits)
            return len(found) if ok else 0
        if kind == "iban":
            return _longest(found, lambda s: iban_ok(s.replace(" ", "")))
        # phone
        if found.startswith("+"):
            return _longest(found, lambda s: len(_digits(s)) in _PHONE_DIGITS)
        if found.startswith("0"):
            return len(found) if len(_digits(found)) in _NATIONAL_DIGITS else 0
        return len(found)

    def _kept(self, kind, value):
        if _canonical(value) in self.keep:
            return True
        return kind == "email" and value.lower().endswith(self.keep_domains)


def _canonical(value):
    return "".join(value.split()).lower()
