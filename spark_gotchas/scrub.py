"""Keep secrets out of everything the suite shows or writes.

Two kinds of masking, both in :func:`mask_text`, applied to every string of the JSON report, the
snapshot, the Markdown summary, the soak's files, and (through :mod:`spark_gotchas.verdict`)
every G-line and fix on the terminal:

- the values of this environment's secret-named variables (``HF_TOKEN``, ``GITHUB_TOKEN``,
  ``WANDB_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``*_PASSWORD`` …), wherever they occur;
- credentials by their shape, wherever they occur: URL userinfo (``https://user:***@host``),
  ``key=value``, ``key: value`` and JSON ``"key": "value"`` with a secret-named key,
  ``--secret-flag value`` and ``--secret-flag=value``, ``Authorization:`` / ``Bearer`` /
  ``Basic`` values, and tokens by their prefix (``ghp_``, ``github_pat_``, ``hf_``, ``sk-``,
  ``xox?-``, ``glpat-``, ``AKIA``).

A name is secret when one of its words is (``token``, ``secret``, ``password``, ``api key`` …):
``--hf-token`` and ``HF_TOKEN`` are, ``--tokenizer`` and ``max_num_batched_tokens`` are not.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Callable, Iterable, Iterator, Mapping

MASK = "***"
MIN_SECRET_LEN = 4

_SECRET_WORDS = frozenset({
    "token", "secret", "password", "passwd", "passphrase", "credential", "credentials",
    "cookie", "apikey", "auth", "authorization", "authtoken", "pat", "dsn", "privatekey",
    "accesskey", "secretkey", "sessionkey",
})
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "apikey", "accesskey")
_KEY_WORDS = frozenset({"api", "access", "private", "secret", "session", "account", "signing",
                        "encryption", "master", "client", "license", "ssh", "deploy"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_HINT_WORDS = r"(?i:token|secret|pass|credential|cookie|auth|pat|dsn|key)"  # one is in every secret name
_HINT = re.compile(_HINT_WORDS)


def _words(name: str) -> list[str]:
    """``HF_TOKEN`` -> [hf, token]; ``apiKey`` -> [api, key]; ``--kv-transfer`` -> [kv, transfer]."""
    return [w.lower() for w in _WORD.findall(name)]


@functools.lru_cache(maxsize=4096)  # a text asks about the same keys again and again
def is_secret_name(name: str) -> bool:
    """True for a variable, flag or key name that holds a credential."""
    if not _HINT.search(name):  # most names: no word of a secret in them (a text's every key= is asked)
        return False
    words = _words(name)
    if not words:
        return False
    for i, word in enumerate(words):
        if word in _SECRET_WORDS or (word.endswith(_SECRET_SUFFIXES) and word not in ("tokens",)):
            return True
        if word == "key" and (i == len(words) - 1 or (i > 0 and words[i - 1] in _KEY_WORDS)):
            return True
    return False


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables, longest first (so overlapping values mask fully)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def scrub_env(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of an environment with secret-looking variables' values masked."""
    return {k: (MASK if is_secret_name(k) else mask_text(v)) for k, v in environ.items()}


# -- credentials by shape -------------------------------------------------------------------------
# ``sk-`` and ``xox?-`` tokens start a word, or follow a control character already shown escaped
# (``\x0a``, ``\u2028``, ``\n`` as repr writes it): text escaped before it is masked keeps no token.
_ESCAPED_BEFORE = r"(?<=\\x[0-9a-fA-F]{2})|(?<=\\u[0-9a-fA-F]{4})|(?<=\\[nrtabfv])"
# A prefix no word holds (``ghp_``, ``github_pat_``, ``hf_``, ``glpat-``, ``AKIA``, ``ASIA``) makes a
# token wherever it stands, glued to what comes before it too (``x1ghp_…``); ``sk-`` and ``xox?-``
# end ordinary words (``task-…``, ``disk-…``), so they must start one.
_TOKEN_SHAPES = re.compile(
    r"gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|hf_[A-Za-z0-9]{16,}|glpat-[A-Za-z0-9_-]{16,}|"
    r"(?:AKIA|ASIA)[0-9A-Z]{16}|"
    r"(?:(?<![A-Za-z0-9])|" + _ESCAPED_BEFORE + r")(?:sk-[A-Za-z0-9_-]{16,}|xox[abposre]-[A-Za-z0-9-]{8,})"
)
# An escape sequence (``ESC [ 32 m``, raw or shown escaped) ends a word: what follows it starts one.
_ESCAPE_SEQUENCE = re.compile(r"(?:\x1b|\\x1b)(?:\[[0-9;?]*+[ -/]*+[@-~]|\][^\x07\x1b\\]*+|[@-Z\\-_])")


def _mask_tokens(text: str) -> str:
    """Tokens masked in each stretch between escape sequences (one pass over the text)."""
    if "x1b" not in text and "\x1b" not in text:
        return _TOKEN_SHAPES.sub(MASK, text)
    pieces, last = [], 0
    for m in _ESCAPE_SEQUENCE.finditer(text):
        pieces.append(text[last:m.end()])
        last = m.end()
    pieces.append(text[last:])
    return "".join(_TOKEN_SHAPES.sub(MASK, piece) for piece in pieces)


# Every pattern below reads each character a bounded number of times, so masking is linear in the
# text (a 128 KB argument on a command line, a 24 MB reading): a name, scheme or flag is tried once
# per run of its characters, from the run's start, with possessive repeats (``*+``) that never give
# back what they took; the values after secret names are found by :func:`_value_spans`, which never
# reads one value twice. A name none of whose words could be secret (no ``token``, ``key``, ``pass``
# … in it) is not matched at all: ``a=a=a=…`` costs no Python step per key. Each keeps the leftmost-match meaning of its plain form
# (``[A-Za-z_][A-Za-z0-9_.-]*`` at every position): the run's leading characters that cannot start a
# name are skipped, and a URL's scheme fails where a later scheme of the same run could start (a
# letter after ``+``, ``.`` or ``-``), which is then tried: the text before a match is kept as it
# is, so the masked result is the same.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9]*+(?:[+.-]++(?:[0-9][A-Za-z0-9]*+)?)*+://)"
                           r"(?P<user>[^\s/@:?#]*+)(?::(?P<pw>[^\s/@]*+))?@")
_AUTH_HEADER = re.compile(r"(?i)(?P<head>(?:\b|" + _ESCAPED_BEFORE + r")(?:proxy-)?authorization\s*[:=]\s*)(?P<scheme>(?:bearer|basic|token|digest)\s+)?"
                          r"(?P<val>[^\s\"',;]+)")
_BEARER = re.compile(r"(?i)(?P<head>(?:\b|" + _ESCAPED_BEFORE + r")(?:bearer|basic)\s+)(?P<val>[A-Za-z0-9._~+/=-]{6,})")
# key=value, key: value, "key": "value", 'key'='value' (the key is checked by is_secret_name). The
# value is read after the match, not consumed: a key that is no secret leaves its value to be read
# again (``note="token": "…"`` is a note holding a token).
_KEY_VALUE = re.compile(r"""(?<![A-Za-z0-9_.-])[0-9.-]*+(?=[A-Za-z0-9_.-]*?""" + _HINT_WORDS + r""")"""
                        r"""(?P<name>[A-Za-z_][A-Za-z0-9_.-]*+)\\?["']?[ \t]*+[:=][ \t]*+""")
# --flag value and --flag=value (the flag is checked by is_secret_name); a run's characters before
# its first flag start (``-`` after neither a word character nor ``-``) are skipped.
_FLAG_START = r"(?:(?<![\w-])|" + _ESCAPED_BEFORE + r")--?[A-Za-z]"
_FLAG_VALUE = re.compile(r"(?<![A-Za-z0-9_.-])(?:(?!" + _FLAG_START + r")[A-Za-z0-9_.-])*+"
                         r"(?P<name>(?=[A-Za-z0-9_.-]*?" + _HINT_WORDS + ")" + _FLAG_START + r"[A-Za-z0-9_.-]*+)"
                         r"(?:=|[ \t]++)(?=[^-])")
# A quote never closed (a command line cut short, ``password="hunter2``) opens a value that ends at
# the next white space or quote; ``\'…\'`` is a single-quoted value as ``repr`` writes it.
_VALUE = re.compile(r""""(?P<dq>(?:[^"\\\n]|\\.)*+)"|'(?P<sq>[^'\n]*+)'|\\'(?P<rsq>(?:[^'\\\n]|\\[^'])*+)\\'"""
                    r"""|(?P<bare>[^\s"',;&}\])]++)|\\?["'](?P<open>[^\s"']++)""")


def _mask_userinfo(m: re.Match) -> str:
    user, pw = m.group("user"), m.group("pw")
    if pw is not None:
        return f"{m.group('scheme')}{user}:{MASK}@"
    if len(user) >= 16 or _TOKEN_SHAPES.fullmatch(user):  # a token used as the user name
        return f"{m.group('scheme')}{MASK}@"
    return m.group(0)


def _value_spans(pattern: re.Pattern, text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of the value after every secret name ``pattern`` finds: a double- or
    single-quoted string's inside, or a bare word. A bare value holds no quote, so a value that
    starts inside the one before ends where it does (``token=token=…`` reads its run once); quoted
    values never overlap (a quote inside one would have closed it)."""
    bare_end = 0
    for m in pattern.finditer(text):
        if not is_secret_name(m.group("name").lstrip("-")):
            continue
        at = m.end()
        if at < bare_end:
            yield at, bare_end
            continue
        value = _VALUE.match(text, at)
        if value is None:
            continue
        if value.group("bare") is not None:
            bare_end = value.end()
            yield at, bare_end
        elif value.group("open") is not None:
            yield value.start("open"), value.end()
        elif value.group("rsq") is not None:
            yield at + 2, value.end() - 2
        else:
            yield at + 1, value.end() - 1


def _mask_named_values(pattern: re.Pattern, text: str) -> str:
    """Mask the value after every secret name ``pattern`` finds (a value that is itself
    ``name: value`` is read again, and both are masked)."""
    out: list[str] = []
    pos = 0
    for start, end in sorted(_value_spans(pattern, text)):
        if end <= pos:
            continue
        out += [text[pos:max(start, pos)], MASK]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def mask_shapes(text: str) -> str:
    """``text`` with every credential recognised by its shape masked (no environment needed)."""
    if not text:
        return text
    text = _mask_tokens(text)
    if "://" in text:  # each pass below only where what it needs is there: a 24 MB reading takes seconds
        text = _URL_USERINFO.sub(_mask_userinfo, text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group('head')}{m.group('scheme') or ''}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group('head')}{MASK}", text)
    if "-" in text:
        text = _mask_named_values(_FLAG_VALUE, text)
    if ":" in text or "=" in text:
        text = _mask_named_values(_KEY_VALUE, text)
    return text


def mask_text(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with this environment's secret values and every credential shape masked."""
    for value in secret_values() if secrets is None else secrets:
        if value and value in text:
            text = text.replace(value, MASK)
    return mask_shapes(text)


def mask_argv(argv: Iterable[str]) -> list[str]:
    """A command line with its credentials masked: ``--api-key X`` masks X (a separate token),
    and every token is masked as text (``--hf-token=X``, ``TOKEN=X``, a JSON argument)."""
    out: list[str] = []
    mask_next = False
    for tok in argv:
        if mask_next:
            mask_next = False
            if not tok.startswith("-"):  # the secret flag's value (a flag after it has none)
                out.append(MASK)
                continue
        if tok.startswith("-") and "=" not in tok and is_secret_name(tok.lstrip("-")):
            mask_next = True
        out.append(mask_text(tok))
    return out


def scrub_named(obj: Any) -> Any:
    """A copy of ``obj`` whose values under a secret-looking key (``password``, ``GITHUB_TOKEN``,
    ``api_key``) are masked whole, at any depth: for name-value tables such as pytest-metadata's
    (``--metadata password hunter2``), not for readings, whose ``key`` or ``token_count`` is data."""
    if isinstance(obj, dict):
        return {k: MASK if isinstance(k, str) and is_secret_name(k) and v not in (None, "") else scrub_named(v)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub_named(v) for v in obj]
    return obj


def scrub(obj: Any, secrets: Iterable[str] | None = None, then: Callable[[str], str] | None = None) -> Any:
    """A copy of ``obj`` (JSON-like: dicts, lists, strings …) with :func:`mask_text` applied to
    every string, keys and values alike, and ``then`` after it. Always a new object, never ``obj``
    itself."""
    values = list(secret_values() if secrets is None else secrets)

    def clean(x: Any) -> Any:
        if isinstance(x, str):
            return mask_text(x, values) if then is None else then(mask_text(x, values))
        if isinstance(x, dict):
            return {clean(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return clean(obj)
