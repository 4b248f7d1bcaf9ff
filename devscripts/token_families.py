"""Write the token families the masker knows by prefix, from gitleaks' maintained rule set.

    git clone https://github.com/gitleaks/gitleaks /tmp/gitleaks
    python devscripts/token_families.py /tmp/gitleaks/config/gitleaks.toml \
        --license /tmp/gitleaks/LICENSE --commit "$(git -C /tmp/gitleaks rev-parse HEAD)" \
        > spark_gotchas/base/token_families.json

gitleaks (https://github.com/gitleaks/gitleaks, MIT licence) keeps about 220 rules, one per kind of
credential. Its regular expressions are written for Go's RE2, which never backtracks; many of them
(``[\\w.-]{0,50}?(?:name)(?:[ \\t\\w.-]{0,20})…``) backtrack in Python's ``re``, and 200 expressions
run over every string would be 200 passes. So the masker does not run them: this script keeps only
the rules anchored on a literal prefix (``npm_``, ``AIza``, ``sk_live_``, ``glpat-``, a JWT's ``ey``)
and writes each as a family that ``spark_gotchas/base/scrub.py`` compiles into its one linear pattern:

- ``prefixes``: the literal starts (a rule's ``(?:sk|rk)_(?:test|live|prod)_`` gives six);
- ``body``: what follows, a list of parts: ``[class, least]`` (a character class, matched
  possessively at least that many times and as many more as there are) or a literal string. A
  part's upper bound is dropped (a longer token is masked whole); classes side by side that share a
  character become one class (a possessive run never gives back what the next one needs), and a
  literal that the class before it holds joins that class;
- ``word_start``: the family starts a word (gitleaks' ``\\b``, a prefix shorter than 4 characters,
  a body of more than one part: a JWT's ``ey`` is in words).

Every class is followed by nothing it holds, so an attempt reads each character once and fails or
matches: masking stays linear. Left out, and listed under ``left_out`` with the reason: rules keyed
on context (a name before the value: ``generic-api-key``, ``adafruit-api-key``; the suite's own
``name=value`` masking covers those), rules with a class of any character (they would run to the
line's end), rules without a prefix of at least 2 characters, and the ones the masker does by its
own code (``private-key``: a PEM block; ``curl-auth-*``: a client's password arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the script is run by whoever updates the data
    sys.exit("needs Python 3.11 or later (tomllib)")

import re._constants as C  # noqa: E402  (Python's own regex parser: the rules are read, never run)
import re._parser as P  # noqa: E402

PRINTABLE = frozenset(chr(c) for c in range(0x20, 0x7F))
ANY_CLASS = 90  # a class of this many printable characters is "any character"
MIN_BODY = 8  # fewer characters after the prefix than this are no token's
REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)
IGNORE = C.SRE_FLAG_IGNORECASE
POSIX = {"[:alnum:]": "A-Za-z0-9", "[:alpha:]": "A-Za-z", "[:digit:]": "0-9", "[:upper:]": "A-Z",
         "[:lower:]": "a-z", "[:xdigit:]": "0-9A-Fa-f"}
DONE_BY_THE_MASKER = {"private-key": "a PEM block: the masker's own code, BEGIN to END",
                      "curl-auth-user": "a client's password argument: the masker's own code",
                      "curl-auth-header": "an Authorization header: the masker's own code"}


class Skip(Exception):
    """A rule this script does not turn into a family; the message says why."""


def python_regex(regex: str) -> tuple[str, bool]:
    """The rule's Go regex as Python's parser takes it, and whether it ignores case from a bare
    ``(?i)`` (Go allows one mid-pattern, Python only at the start: it is taken for the whole rule,
    whose prefix is then matched as written)."""
    for posix, chars in POSIX.items():
        regex = regex.replace(posix, chars)
    regex = regex.replace(r"\z", r"\Z")
    return regex.replace("(?i)", ""), "(?i)" in regex


def _category(value) -> frozenset[str]:
    word = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
    table = {C.CATEGORY_WORD: word, C.CATEGORY_DIGIT: frozenset("0123456789"),
             C.CATEGORY_SPACE: frozenset(" \t\n\r\f\v"), C.CATEGORY_NOT_SPACE: PRINTABLE - frozenset(" "),
             C.CATEGORY_NOT_WORD: PRINTABLE - word, C.CATEGORY_NOT_DIGIT: PRINTABLE - frozenset("0123456789")}
    if value not in table:
        raise Skip(f"a class of {value}")
    return table[value]


def chars_of(op, av, ignore: bool) -> frozenset[str] | None:
    """The printable characters one class item matches; None when ``op`` is no class."""
    if op is C.LITERAL:
        found = frozenset(chr(av))
    elif op is C.NOT_LITERAL:
        found = PRINTABLE - {chr(av)}
    elif op is C.ANY:
        found = PRINTABLE
    elif op is C.CATEGORY:
        found = _category(av)
    elif op is C.IN:
        found, negate = set(), False
        for kind, value in av:
            if kind is C.NEGATE:
                negate = True
            elif kind is C.LITERAL:
                found.add(chr(value))
            elif kind is C.RANGE:
                found |= {chr(c) for c in range(value[0], value[1] + 1)}
            elif kind is C.CATEGORY:
                found |= _category(value)
            else:
                raise Skip(f"a class holding {kind}")
        found = frozenset(PRINTABLE - found if negate else found)
    else:
        return None
    if ignore:
        found = found | {c.swapcase() for c in found}
    return frozenset(found) & PRINTABLE


def class_text(chars: frozenset[str]) -> str:
    """A character class matching ``chars``, ranges where they run, escaped for Python's re."""
    codes = sorted(ord(c) for c in chars)
    parts, i = [], 0

    def esc(code: int) -> str:
        c = chr(code)
        return "\\" + c if c in "\\]^-[" else c

    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        parts.append(esc(codes[i]) if i == j else esc(codes[i]) + ("" if j == i + 1 else "-") + esc(codes[j]))
        i = j + 1
    return "[" + "".join(parts) + "]"


def is_end(op, av) -> bool:
    """gitleaks' closing context after a token: ``(?:[\\x60'"\\s;]|\\\\[nr]|$)``, ``\\b``, ``(?:[^\\w-]|\\z)``."""
    if op is C.AT:
        return True
    if op in (C.SUBPATTERN, C.BRANCH):
        text = repr(av)
        return "AT_END" in text or "CATEGORY_SPACE" in text or "NEGATE" in text
    return False


def strings_of(items, ignore: bool, limit: int = 16) -> list[str] | None:
    """The strings a sequence of literals (small alternations and classes of them included) can be;
    None when it is anything else."""
    out = [""]
    for op, av in items:
        if op is C.LITERAL:
            got = [chr(av)]
        elif op is C.SUBPATTERN:
            got = strings_of(av[3], (ignore or bool(av[1] & IGNORE)) and not av[2] & IGNORE, limit)
        elif op is C.BRANCH:
            got = []
            for alt in av[1]:
                inner = strings_of(alt, ignore, limit)
                if inner is None:
                    return None
                got += inner
        elif op is C.IN:
            chars = chars_of(op, av, False)
            got = sorted(chars) if chars is not None and len(chars) <= 4 else None
        else:
            return None
        if got is None:
            return None
        out = [s + g for s in out for g in got]
        if len(out) > limit:
            raise Skip("more than 16 literal starts")
    return out


def least(items) -> int:
    """The fewest characters a sequence matches."""
    total = 0
    for op, av in items:
        if op in REPEATS:
            total += av[0] * least(av[2])
        elif op is C.SUBPATTERN:
            total += least(av[3])
        elif op is C.BRANCH:
            total += min(least(a) for a in av[1])
        elif op is not C.AT:
            total += 1
    return total


class Body:
    """The parts after a prefix, built as the rule's items are walked."""

    def __init__(self) -> None:
        self.parts: list = []  # [set of characters, least] or a literal string

    def add_class(self, chars: frozenset[str], count: int) -> None:
        if len(chars) >= ANY_CLASS:
            raise Skip("a class of any character (it would run to the line's end)")
        last = self.parts[-1] if self.parts else None
        if isinstance(last, list) and last[0] & chars:
            self.parts[-1] = [last[0] | chars, last[1] + count]
        else:
            self.parts.append([chars, count])

    def add_literal(self, text: str) -> None:
        last = self.parts[-1] if self.parts else None
        if isinstance(last, list) and text[0] in last[0]:
            self.add_class(frozenset(text[0]), 1)
            if text[1:]:
                self.add_literal(text[1:])
        elif isinstance(last, str):
            self.parts[-1] += text
        else:
            self.parts.append(text)

    def walk(self, items, ignore: bool, optional: bool = False) -> bool:
        """Add ``items``; False once gitleaks' closing context is reached (the token ends there)."""
        for op, av in items:
            if is_end(op, av):
                return False
            chars = chars_of(op, av, ignore)
            if chars is not None:
                if op is C.LITERAL and not optional and len(chars) == 1:  # (a letter under (?i) is a class of both)
                    self.add_literal(chr(av))
                else:
                    self.add_class(chars, 0 if optional else 1)
            elif op in REPEATS:
                low, _high, inner = av
                fixed = strings_of(inner, ignore)
                if fixed is not None and len(fixed) == 1 and low == _high and not optional:
                    for _ in range(low):
                        self.walk(inner, ignore)
                else:
                    self.add_class(self.union(inner, ignore), 0 if optional else low * least(inner))
            elif op is C.SUBPATTERN:
                scoped = (ignore or bool(av[1] & IGNORE)) and not av[2] & IGNORE
                if not self.walk(av[3], scoped, optional):
                    return False
            elif op is C.BRANCH:
                fixed = [strings_of(a, ignore) for a in av[1]]
                strings = [s for f in fixed if f is not None for s in f]
                if None not in fixed and len({len(s) for s in strings}) == 1 and not optional:
                    if len(set(strings)) == 1:
                        self.add_literal(strings[0])
                    else:
                        for k in range(len(strings[0])):
                            self.add_class(frozenset(s[k] for s in strings), 1)
                else:
                    low = min(least(a) for a in av[1])
                    self.add_class(self.union([i for a in av[1] for i in a], ignore), 0 if optional else low)
            else:
                raise Skip(f"a {op} in the token")
        return True

    def union(self, items, ignore: bool) -> frozenset[str]:
        found: set[str] = set()
        for op, av in items:
            chars = chars_of(op, av, ignore)
            if chars is not None:
                found |= chars
            elif op in REPEATS:
                found |= self.union(av[2], ignore)
            elif op is C.SUBPATTERN:
                found |= self.union(av[3], (ignore or bool(av[1] & IGNORE)) and not av[2] & IGNORE)
            elif op is C.BRANCH:
                for alt in av[1]:
                    found |= self.union(alt, ignore)
            elif op is not C.AT:
                raise Skip(f"a {op} in a class")
        return frozenset(found)


def _opened(items, word_start: bool):
    """The items of the token: a leading ``\\b`` noted, the capture group that holds it opened,
    gitleaks' closing context after it dropped."""
    items = list(items)
    while True:
        while items and items[0][0] is C.AT:
            word_start, items = True, items[1:]
        if items and items[0][0] is C.SUBPATTERN and all(is_end(*i) for i in items[1:]):
            items = list(items[0][1][3])
            continue
        return items, word_start


def families(rule: dict) -> list[dict]:
    """The families of one gitleaks rule (one per alternative of a rule that is a choice of tokens)."""
    if rule["id"] in DONE_BY_THE_MASKER:
        raise Skip(DONE_BY_THE_MASKER[rule["id"]])
    if not rule.get("regex"):
        raise Skip("no regex (a rule on file paths)")
    text, ignore = python_regex(rule["regex"])
    try:
        tree = P.parse(text)
    except Exception as exc:  # noqa: BLE001 (a construct Python's re does not take)
        raise Skip(f"not Python's re: {exc}") from None
    items, word_start = _opened(tree, False)
    if len(items) == 1 and items[0][0] is C.BRANCH:  # a choice of tokens: each alternative its own family
        found = []
        for n, alt in enumerate(items[0][1][1]):
            try:
                found.append(_family(f"{rule['id']}#{n + 1}", rule["regex"], *_opened(alt, word_start), ignore))
            except Skip:
                continue
        if not found:
            raise Skip("no alternative with a literal start")
        return found
    return [_family(rule["id"], rule["regex"], items, word_start, ignore)]


def _family(name: str, regex: str, items, word_start: bool, ignore: bool) -> dict:
    prefixes, k = [""], 0
    while k < len(items):
        got = strings_of([items[k]], False)
        if got is None:
            break
        prefixes = [p + g for p in prefixes for g in got]
        if len(prefixes) > 16:
            raise Skip("more than 16 literal starts")
        k += 1
    if min(len(p) for p in prefixes) < 2:
        raise Skip("no literal start of 2 characters (keyed on the context before the value)")
    body = Body()
    body.walk(items[k:], ignore)
    parts = body.parts
    if parts and isinstance(parts[0], str):  # a literal that opens the body belongs to the prefix
        prefixes, parts = [p + parts[0] for p in prefixes], parts[1:]
    if not any(isinstance(p, list) for p in parts):
        raise Skip("no class after the literal start")
    if isinstance(parts[0], list) and parts[0][1] == 0:
        parts[0][1] = 1
    body_least = sum(p[1] if isinstance(p, list) else len(p) for p in parts)
    if body_least < MIN_BODY:
        raise Skip(f"a body of {body_least} characters: too short to tell from words")
    return {"id": name, "prefixes": sorted(set(prefixes)),
            "body": [p if isinstance(p, str) else [class_text(p[0]), p[1]] for p in parts],
            "word_start": word_start or min(len(p) for p in prefixes) < 4 or len(parts) > 1,
            "from": regex}


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("config", help="gitleaks' config/gitleaks.toml")
    args.add_argument("--license", required=True, help="gitleaks' LICENSE file (its notice ships with the data)")
    args.add_argument("--commit", required=True, help="the gitleaks commit the config is from")
    opts = args.parse_args()
    rules = tomllib.loads(Path(opts.config).read_text())["rules"]
    kept, left_out = [], []
    for rule in rules:
        try:
            kept += families(rule)
        except Skip as why:
            left_out.append({"id": rule["id"], "why": str(why)})
    out = {
        "about": "Token families the masker (spark_gotchas/base/scrub.py) knows by prefix, converted by "
                 "devscripts/token_families.py from gitleaks' rule set; each keeps its rule's id and regex.",
        "source": "https://github.com/gitleaks/gitleaks/blob/" + opts.commit + "/config/gitleaks.toml",
        "license": "MIT",
        "notice": Path(opts.license).read_text().strip().splitlines(),
        "families": kept,
        "left_out": left_out,
    }
    sys.stdout.write(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
