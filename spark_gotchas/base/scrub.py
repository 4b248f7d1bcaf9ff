"""Keep secrets out of everything the suite shows or writes.

Two kinds of masking, both in :func:`mask_text`, applied to every string of the JSON report, the
snapshot, the Markdown summary, the soak's files, and (through :mod:`spark_gotchas.knowledge.verdict`)
every G-line and fix on the terminal:

- the values of this environment's secret-named variables (``HF_TOKEN``, ``GITHUB_TOKEN``,
  ``WANDB_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``*_PASSWORD`` …), wherever they occur;
- credentials by their shape, wherever they occur: a PEM private key, BEGIN to END; URL userinfo
  (``https://user:***@host``); ``key=value``, ``key: value`` and JSON ``"key": "value"`` with a
  secret-named key (a no-break or zero-width space around the ``=``, a percent-encoded
  ``password%3D…`` too); ``--secret-flag value`` and ``--secret-flag=value``, the value being the
  next word whatever it starts with (``--api-key -Dashed``); the password arguments of common
  clients (``mysql -pX``, ``curl -u user:X``, ``redis-cli -a X``, ``sshpass -p X`` …);
  ``Authorization:`` / ``Bearer`` / ``Basic`` values; and tokens by their prefix: the suite's own
  families (``ghp_``, ``hf_``, ``sk-`` …) and the prefix-anchored families of gitleaks' rule set
  (``token_families.json``: ``npm_``, ``AIza``, ``sk_live_``, ``pypi-``, a JWT's ``eyJ…`` …).

A name is secret when one of its words is (``token``, ``secret``, ``password``, ``api key`` …):
``--hf-token`` and ``HF_TOKEN`` are, ``--tokenizer`` and ``max_num_batched_tokens`` are not.

Masking comes before any cut (:func:`clip`): a token cut in two keeps no part of itself in clear.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

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


# -- a PEM private key: one secret from BEGIN to END ------------------------------------------------
_PEM_BEGIN = re.compile(r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
# Without its END (a line cut short): the key's body, base64 lines and their headers, line breaks
# raw or shown escaped (\n, \x0a, \u2028 …), ends where no such character follows.
_PEM_BODY = re.compile(r"(?>(?:[A-Za-z0-9+/=:, \t\r\n-]|\\(?:[nr]|x0[ad]|u202[89]))*)")


def _mask_pem(text: str) -> str:
    out, pos, ends = [], 0, True
    for begin in _PEM_BEGIN.finditer(text):
        if begin.start() < pos:  # inside the block masked before
            continue
        end = None
        if ends:  # once no END follows a BEGIN, none follows a later one: never searched twice
            at = begin.end()
            while (at := text.find("-----END", at)) >= 0:
                found = _PEM_END.match(text, at)
                if found:
                    end = found.end()
                    break
                at += 8
            ends = end is not None
        if end is None:
            end = _PEM_BODY.match(text, begin.end()).end()
        out += [text[pos:begin.start()], MASK]
        pos = end
    out.append(text[pos:])
    return "".join(out)


# -- tokens by their prefix ------------------------------------------------------------------------------
# A family: its literal starts, its body (parts: (class, least) matched possessively, or a literal)
# and whether it must start a word. The suite's own families take a shorter body than a real token
# (a token cut short, or made up for a test, is masked too); a prefix no word holds (``ghp_``,
# ``hf_``, ``AKIA``) makes a token wherever it stands, glued to what comes before it too
# (``x1ghp_…``); ``sk-`` and ``xox?-`` end ordinary words (``task-…``, ``disk-…``), so they must start one.
_OWN_FAMILIES = (
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), (("[A-Za-z0-9]", 16),), False),
    (("github_pat_",), (("[A-Za-z0-9_]", 16),), False),
    (("hf_",), (("[A-Za-z0-9]", 16),), False),
    (("glpat-",), (("[A-Za-z0-9_-]", 16),), False),
    (("AKIA", "ASIA"), (("[0-9A-Z]", 16),), False),
    (("sk-",), (("[A-Za-z0-9_-]", 16),), True),
    (tuple(f"xox{c}-" for c in "abposre"), (("[A-Za-z0-9-]", 8),), True),
)
FAMILIES_FILE = Path(__file__).with_name("token_families.json")  # gitleaks' families (MIT), see its notice
# A word starts after no letter or digit, or after a control character already shown escaped
# (``\x0a``, ``\u2028``, ``\U000e0041``, ``\n`` as repr writes it): text escaped before it is masked keeps no token.
_ESCAPED_BEFORE = r"(?<=\\x[0-9a-fA-F]{2})|(?<=\\u[0-9a-fA-F]{4})|(?<=\\U[0-9a-fA-F]{8})|(?<=\\[nrtabfv])"


def _word_start_after(prefix: str) -> str:
    """A word starts at the ``prefix`` just read: a lookbehind past it, tried once the whole prefix
    matched (the pattern opens with a literal, so ``re`` skips every position that cannot start a
    token, and ``aaaa…`` fails at its second character, not at a lookbehind at every position)."""
    c = re.escape(prefix)
    return (rf"(?:(?<![A-Za-z0-9]{c})|(?<=\\x[0-9a-fA-F]{{2}}{c})|(?<=\\u[0-9a-fA-F]{{4}}{c})"
            rf"|(?<=\\U[0-9a-fA-F]{{8}}{c})|(?<=\\[nrtabfv]{c}))")


def _families() -> list[tuple[tuple[str, ...], tuple, bool]]:
    found = list(_OWN_FAMILIES)
    try:
        data = json.JSONDecoder().decode(FAMILIES_FILE.read_text(encoding="utf-8"))
        for family in data["families"]:
            body = tuple(p if isinstance(p, str) else (p[0], int(p[1])) for p in family["body"])
            found.append((tuple(family["prefixes"]), body, bool(family["word_start"])))
    except Exception:  # noqa: BLE001 (the masker never fails: without its data file it masks the suite's own families)
        return list(_OWN_FAMILIES)
    return found


@functools.lru_cache(maxsize=1)
def token_shapes() -> re.Pattern:
    """One pattern for every token family: grouped by the first character of their prefixes (the
    pattern opens with a literal in every branch, so ``re`` only tries positions where one of those
    characters stands), the fullest bodies first within a group."""
    groups: dict[str, list[tuple[int, int, str]]] = {}
    for prefixes, body, word_start in _families():
        rest = "".join(re.escape(p) if isinstance(p, str) else f"{p[0]}{{{p[1]},}}+" for p in body)
        for prefix in prefixes:
            start = _word_start_after(prefix) if word_start else ""
            groups.setdefault(prefix[0], []).append((-len(body), -len(prefix), re.escape(prefix[1:]) + start + rest))
    # the fullest first: glpat-…​.x9 (routable) before glpat-… alone, which would leave its tail in clear
    branches = [re.escape(first) + "(?:" + "|".join(p for *_, p in sorted(alts)) + ")" for first, alts in groups.items()]
    return re.compile("|".join(branches))


# An escape sequence (``ESC [ 32 m``, raw or shown escaped) ends a word: what follows it starts one.
# ESC and one letter (``ESC A``) may be a two-character sequence or a lone ESC before a word
# (``ESC AKIA…``): the letter starts the next stretch either way, so a token it begins is masked.
_ESCAPE_SEQUENCE = re.compile(r"(?:\x1b|\\x1b)(?:\[[0-9;?]*+[ -/]*+[@-~]|\][^\x07\x1b\\]*+|(?=[@-Z\\-_]))")


def _mask_tokens(text: str) -> str:
    """Tokens masked in each stretch between escape sequences (one pass over the text)."""
    shapes = token_shapes()
    if "x1b" not in text and "\x1b" not in text:
        return shapes.sub(MASK, text)
    pieces, last = [], 0
    for m in _ESCAPE_SEQUENCE.finditer(text):
        pieces.append(text[last:m.end()])
        last = m.end()
    pieces.append(text[last:])
    return "".join(shapes.sub(MASK, piece) for piece in pieces)


# Every pattern below reads each character a bounded number of times, so masking is linear in the
# text (a 128 KB argument on a command line, a 24 MB reading): a name, scheme or flag is tried once
# per run of its characters, from the run's start, with possessive repeats (``*+``) that never give
# back what they took (a repeat of a group is an atomic group, ``(?>(?:…)*)``: Python's ``re`` before
# 3.11.5 mis-matches a possessive repeat of one, cpython#106052 and #100061, and Debian 12 ships
# 3.11.2); the values after secret names are found by :func:`_value_spans`, which never
# reads one value twice. A name none of whose words could be secret (no ``token``, ``key``, ``pass``
# … in it) is not matched at all: ``a=a=a=…`` costs no Python step per key. Each keeps the leftmost-match meaning of its plain form
# (``[A-Za-z_][A-Za-z0-9_.-]*`` at every position): the run's leading characters that cannot start a
# name are skipped, and a URL's scheme fails where a later scheme of the same run could start (a
# letter after ``+``, ``.`` or ``-``), which is then tried: the text before a match is kept as it
# is, so the masked result is the same.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9]*+(?>(?:[+.-]++(?:[0-9][A-Za-z0-9]*+)?)*)://)"
                           r"(?P<user>[^\s/@:?#]*+)(?::(?P<pw>[^\s/@]*+))?@")
_AUTH_HEADER = re.compile(r"(?i)(?P<head>(?:\b|" + _ESCAPED_BEFORE + r")(?:proxy-)?authorization\s*[:=]\s*)(?P<scheme>(?:bearer|basic|token|digest)\s+)?"
                          r"(?P<val>[^\s\"',;]+)")
_BEARER = re.compile(r"(?i)(?P<head>(?:\b|" + _ESCAPED_BEFORE + r")(?:bearer|basic)\s+)(?P<val>[A-Za-z0-9._~+/=-]{6,})")
# What may stand between a name and its value besides spaces and tabs: a no-break or other Unicode
# space, a zero-width one (raw, or shown escaped as \u200b), none of which ends the value's text.
_BLANK = r"(?:[ \t\u00a0\u1680\u2000-\u200d\u202f\u205f\u2060\u3000\ufeff]|\\u(?:200[b-d]|2060|feff|00a0)|\\xa0)"
# key=value, key: value, "key": "value", 'key'='value', password%3Dvalue (the key is checked by
# is_secret_name). The value is read after the match, not consumed: a key that is no secret leaves
# its value to be read again (``note="token": "…"`` is a note holding a token).
_KEY_VALUE = re.compile(r"""(?<![A-Za-z0-9_.-])[0-9.-]*+(?=[A-Za-z0-9_.-]*?""" + _HINT_WORDS + r""")"""
                        r"""(?P<name>[A-Za-z_][A-Za-z0-9_.-]*+)(?:\\?["']|%2[27])?(?>""" + _BLANK + r"""*)"""
                        r"""(?:[:=]|%3[AaDd])(?>""" + _BLANK + r"""*)""")
# --flag value and --flag=value (the flag is checked by is_secret_name); a run's characters before
# its first flag start (``-`` after neither a word character nor ``-``) are skipped. The value is the
# next word whatever it starts with: ``--api-key -PlantedKey`` (a flag that takes a value takes that one).
_FLAG_START = r"(?:(?<![\w-])|" + _ESCAPED_BEFORE + r")--?[A-Za-z]"
_FLAG_VALUE = re.compile(r"(?<![A-Za-z0-9_.-])(?>(?:(?!" + _FLAG_START + r")[A-Za-z0-9_.-])*)"
                         r"(?P<name>(?=[A-Za-z0-9_.-]*?" + _HINT_WORDS + ")" + _FLAG_START + r"[A-Za-z0-9_.-]*+)"
                         r"(?:=|(?>" + _BLANK + r"+))")
# A quote never closed (a command line cut short, ``password="hunter2``) opens a value that ends at
# the next white space or quote; ``\'…\'`` is a single-quoted value as ``repr`` writes it.
_VALUE = re.compile(r""""(?P<dq>(?>(?:[^"\\\n]|\\.)*))"|'(?P<sq>[^'\n]*+)'|\\'(?P<rsq>(?>(?:[^'\\\n]|\\[^'])*))\\'"""
                    r"""|(?P<bare>(?!\\["'])[^\s"',;&}\])]++)|\\?["'](?P<open>[^\s"']++)""")


def _mask_userinfo(m: re.Match) -> str:
    user, pw = m.group("user"), m.group("pw")
    if pw is not None:
        return f"{m.group('scheme')}{user}:{MASK}@"
    if len(user) >= 16 or token_shapes().fullmatch(user):  # a token used as the user name
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


def _masked_spans(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with each (start, end) span replaced by the mask (overlapping spans as one)."""
    out: list[str] = []
    pos = 0
    for start, end in sorted(spans):
        if end <= pos:
            continue
        out += [text[pos:max(start, pos)], MASK]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _mask_named_values(pattern: re.Pattern, text: str) -> str:
    """Mask the value after every secret name ``pattern`` finds (a value that is itself
    ``name: value`` or a secret flag is read again, and both are masked: ``--token --api-key X``
    masks X whichever flag took a value)."""
    return _masked_spans(text, _value_spans(pattern, text))


# -- the password arguments of common clients ----------------------------------------------------------
# What each client's own flags hold: ``next``: the next argument (``-aX`` glued too, for a short
# flag); ``glued``: only what is glued to the flag (``mysql -pX``; ``-p`` alone prompts);
# ``user``: the next argument's part after its first ``:`` (``%`` for smbclient): ``user:***``;
# ``pass:``: the next argument's part after ``pass:`` (openssl). A client named ``login`` after
# its name (``docker login -p X``) reads its flags only then; sshpass's own flags end at the command
# it runs (``sshpass -p X ssh -p 22 host``: 22 is ssh's port).
_MYSQL = {"-p": "glued"}
_CLIENTS: dict[str, dict[str, str]] = {
    **{name: _MYSQL for name in ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlcheck", "mysqlshow",
                                 "mysqlpump", "mysqlslap", "mariadb", "mariadb-dump", "mariadb-admin",
                                 "mariadb-import", "mariadb-check")},
    "sshpass": {"-p": "next"},
    "redis-cli": {"-a": "next", "--pass": "next"},
    "valkey-cli": {"-a": "next", "--pass": "next"},
    "curl": {"-u": "user", "--user": "user", "-U": "user", "--proxy-user": "user", "--oauth2-bearer": "next"},
    **{name: {"-p": "next"} for name in ("mongosh", "mongo", "mongodump", "mongorestore", "mongoexport", "mongoimport")},
    **{name: {"-p": "next"} for name in ("docker", "podman", "nerdctl", "buildah", "skopeo")},
    **{name: {"-w": "next"} for name in ("ldapsearch", "ldapmodify", "ldapadd", "ldapdelete", "ldapwhoami",
                                         "ldapcompare", "ldapmodrdn", "ldapexop")},
    "ldappasswd": {"-w": "next", "-a": "next", "-s": "next"},
    "sqlcmd": {"-P": "next"},
    "bcp": {"-P": "next"},
    "smbclient": {"-U": "user%", "--user": "user%"},
    "openssl": {"-passin": "pass:", "-passout": "pass:", "-pass": "pass:"},
}
_AFTER_LOGIN = frozenset({"docker", "podman", "nerdctl", "buildah", "skopeo"})
_OWN_FLAGS_END_AT_THE_COMMAND = frozenset({"sshpass"})
_CLIENT_WORD = re.compile(r"(?:(?<![\w.-])|" + _ESCAPED_BEFORE + r")(?:" + "|".join(re.escape(n) for n in sorted(_CLIENTS, key=len, reverse=True))
                          + r")(?![\w.-])")
# A shell command's end: a line break (raw or escaped), ``;``, ``|`` or ``&``.
_COMMAND_END = re.compile(r"[\n\r;|&]|\\(?:n|x0a|x0d|u2028)")
_TEXT_WORD = re.compile(r"\S++")


def _unquoted(word: str, start: int, end: int) -> tuple[int, int]:
    """The span ``start:end`` of ``word`` without a quote at either end."""
    if end - start >= 1 and word[start] in "\"'":
        start += 1
    if end > start and word[end - 1] in "\"'":
        end -= 1
    return start, end


def _client_spans(words: list[str]) -> Iterator[tuple[int, int, int]]:
    """(word index, start, end) of each password a client's flags hold in ``words``, a command's
    words from one that names a client (its path's last part) on."""
    client: Optional[dict[str, str]] = None
    name, pending, positional = "", "", 0
    for i, word in enumerate(words):
        base = word.rsplit("/", 1)[-1].strip("\"'")
        if pending:
            kind, pending = pending, ""
            if kind == "next":
                yield (i, *_unquoted(word, 0, len(word)))
            elif kind in ("user", "user%"):
                sep = word.find(":" if kind == "user" else "%")
                if sep >= 0:
                    yield (i, *_unquoted(word, sep + 1, len(word)))
            elif kind == "pass:" and (at := word.find("pass:")) >= 0:
                yield (i, *_unquoted(word, at + 5, len(word)))
            continue
        if base in _CLIENTS:
            name, client = base, (None if base in _AFTER_LOGIN else _CLIENTS[base])
            positional = 0
            continue
        if name in _AFTER_LOGIN and client is None:
            if word == "login":
                client = _CLIENTS[name]
            elif not word.startswith("-"):
                name = ""
            continue
        if client is None:
            continue
        if not word.startswith("-"):
            positional += 1
            if name in _OWN_FLAGS_END_AT_THE_COMMAND:
                client, name = None, ""
            continue
        flag = word.split("=", 1)[0]
        kind = client.get(flag)
        if kind is not None and "=" not in word:
            if kind != "glued":
                pending = kind
            continue
        for short, kind in client.items():  # a short flag with its value glued: -pX, -uuser:X
            if len(short) == 2 and word.startswith(short) and len(word) > 2 and short not in ("--",):
                if kind in ("glued", "next"):
                    yield (i, *_unquoted(word, 2, len(word)))
                elif kind in ("user", "user%") and (sep := word.find(":" if kind == "user" else "%", 2)) >= 0:
                    yield (i, *_unquoted(word, sep + 1, len(word)))
                break


def _mask_clients(text: str) -> str:
    """The client password arguments of every command in ``text`` masked: each command, from the
    word naming its client to the command's end, read once."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (m := _CLIENT_WORD.search(text, pos)) is not None:
        end_match = _COMMAND_END.search(text, m.end())
        end = end_match.start() if end_match else len(text)
        words = list(_TEXT_WORD.finditer(text, m.start(), end))
        for i, start, stop in _client_spans([w.group() for w in words]):
            if stop > start:
                spans.append((words[i].start() + start, words[i].start() + stop))
        pos = max(end, m.end())
    return _masked_spans(text, spans) if spans else text


def mask_shapes(text: str) -> str:
    """``text`` with every credential recognised by its shape masked (no environment needed)."""
    if not text:
        return text
    if "-----BEGIN" in text:
        text = _mask_pem(text)
    text = _mask_tokens(text)
    if "://" in text:  # each pass below only where what it needs is there: a 24 MB reading takes seconds
        text = _URL_USERINFO.sub(_mask_userinfo, text)
    text = _AUTH_HEADER.sub(lambda m: f"{m.group('head')}{m.group('scheme') or ''}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group('head')}{MASK}", text)
    if "-" in text:
        text = _mask_named_values(_FLAG_VALUE, text)
        text = _mask_clients(text)
    if ":" in text or "=" in text or "%3" in text:
        text = _mask_named_values(_KEY_VALUE, text)
    return text


def mask_text(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with this environment's secret values and every credential shape masked."""
    for value in secret_values() if secrets is None else secrets:
        if value and value in text:
            text = text.replace(value, MASK)
    return mask_shapes(text)


_WORD_ENDS = (" ", "\t", "\n", ",", ";", "&", "}", "]", ")")  # where no credential shape goes on past


def clip(text: object, room: int, mark: str = "…", secrets: Iterable[str] | None = None) -> str:
    """``text`` masked, then cut to at most ``room`` characters ending in ``mark``: a credential
    the cut would split is masked whole first, never left with part of itself in clear (a
    ``ghp_`` token cut to 15 characters is no longer a shape the masker knows). Of a long text only
    what can be shown is masked: its start, ended at a word's end (a credential runs to one)."""
    text = str(text)
    reach = 4 * room + 256
    if len(text) > reach:
        # end at a word's end; one word longer than that is cut where it is: its start, with far more
        # than room characters after it, keeps the shape the masker knows
        end = max(text.rfind(sep, 0, reach) for sep in _WORD_ENDS) + 1
        text = text[:end if end > room else reach]
    masked = mask_text(text, secrets)
    if len(masked) <= room:
        return masked
    return masked[:max(0, room - len(mark))] + mark


_FLAG_WORD = re.compile(r"--?[A-Za-z][A-Za-z0-9_.-]*+")


def mask_argv(argv: Iterable[str]) -> list[str]:
    """A command line with its credentials masked: ``--api-key X`` masks X (the next argument,
    whatever it starts with), a client's password argument is masked (``mysql -pX``,
    ``curl -u user:X``), and every argument is masked as text (``--hf-token=X``, ``TOKEN=X``, a
    JSON argument, a PEM key)."""
    argv = [str(tok) for tok in argv]
    out: list[str] = []
    mask_next = False
    for tok in argv:
        secret_flag = _FLAG_WORD.fullmatch(tok) is not None and is_secret_name(tok.lstrip("-"))
        out.append(MASK if mask_next else tok)
        # a value that is itself a secret flag masks the next one too: --token --api-key X masks X
        mask_next = secret_flag
    for i, start, end in _client_spans(argv):
        if end > start and out[i] != MASK:
            out[i] = out[i][:start] + MASK + out[i][end:]
    return [tok if tok == MASK else mask_text(tok) for tok in out]


# -- whole documents ------------------------------------------------------------------------------------
def map_strings(obj: Any, on_str: Callable[[str], str], secret_keys: bool = False) -> Any:
    """A copy of a JSON-like ``obj`` with ``on_str`` applied to every string, keys and values alike
    (with ``secret_keys``, the value under a secret-named key masked whole instead). Iterative: a
    document nested 1,000 levels deep is copied as one nested 3 deep, never a RecursionError."""
    if isinstance(obj, str):
        return on_str(obj)
    if not isinstance(obj, (dict, list, tuple)):
        return obj
    root: Any = {} if isinstance(obj, dict) else []
    todo = [(obj, root)]
    while todo:
        source, copy = todo.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, value in items:
            if isinstance(copy, dict):
                if secret_keys and isinstance(key, str) and is_secret_name(key) and value not in (None, ""):
                    copy[key] = MASK
                    continue
                key = on_str(key) if isinstance(key, str) and not secret_keys else key
            if isinstance(value, (dict, list, tuple)):
                child: Any = {} if isinstance(value, dict) else []
                todo.append((value, child))
                value = child
            elif isinstance(value, str):
                value = on_str(value)
            if isinstance(copy, dict):
                copy[key] = value
            else:
                copy.append(value)
    return root


def scrub_named(obj: Any) -> Any:
    """A copy of ``obj`` whose values under a secret-looking key (``password``, ``GITHUB_TOKEN``,
    ``api_key``) are masked whole, at any depth: for name-value tables such as pytest-metadata's
    (``--metadata password hunter2``), not for readings, whose ``key`` or ``token_count`` is data."""
    return map_strings(obj, lambda s: s, secret_keys=True)


def scrub(obj: Any, secrets: Iterable[str] | None = None, then: Callable[[str], str] | None = None) -> Any:
    """A copy of ``obj`` (JSON-like: dicts, lists, strings …) with :func:`mask_text` applied to
    every string, keys and values alike, and ``then`` after it. Always a new object, never ``obj``
    itself, at any depth."""
    values = list(secret_values() if secrets is None else secrets)
    if then is None:
        return map_strings(obj, lambda s: mask_text(s, values))
    return map_strings(obj, lambda s: then(mask_text(s, values)))
