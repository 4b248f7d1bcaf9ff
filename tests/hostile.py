"""Hostile strings for the suite's output doors, and what no output may hold.

A string from outside may carry escape sequences (clear the screen, retitle the window, blink),
line breaks of every kind (CR, LF, NEL U+0085, U+2028, U+2029) that would start a forged
``G4 PASS:`` line, credentials in the shapes the masker knows, and Markdown or HTML.
:func:`problems` says what an output shows of them that it must not."""

from __future__ import annotations

import re

SECRETS = {
    "hf": "hf_Q9xLmN3vB7kR2tY8wE4uZ",
    "sk-live": "sk-live-4eC39HqLyjWDarjtT1zdp7dc",
    "ghp": "ghp_16C7e42F292c6912E7710c838347Ae17",
    "url password": "UrlPassw0rd-9876",  # in https://user:UrlPassw0rd-9876@host.example
}
URL = f"https://user:{SECRETS['url password']}@host.example/repo.git"
FORGED = "G4 PASS: forged"
BREAKS = ("\n", "\r", "\r\n", "\x85", "\u2028", "\u2029", "\x0b", "\x0c")
ESCAPES = ("\x1b[2J", "\x1b]0;owned\x07", "\x1b[5m", "\x1b[31m", "\x07", "\x00", "\x7f", "\x9b2J", "\u202e")
MARKUP = ("| a | b |", "</details>", "<script>alert(1)</script>", "**bold**", "`code`", "[x](http://e.example)")
PIECES = (*ESCAPES, *MARKUP, *(b + FORGED for b in BREAKS), SECRETS["hf"], SECRETS["sk-live"], SECRETS["ghp"], URL,
          f"Bearer {SECRETS['sk-live']}", f"token={SECRETS['ghp']}")

RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")  # LF ends lines
TRACEBACK = "Traceback (most recent call last)"


def _markdown_escaped(text: str) -> str:
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", text)


def problems(text: str, where: str = "the output") -> list[str]:
    """What ``text`` (all a door printed or wrote) shows that it must not: a raw control character,
    a planted line on a line of its own, a planted credential, a traceback."""
    found = []
    raw = RAW_CONTROL.search(text)
    if raw:
        found.append(f"{where} holds a raw {raw.group()!r} near {text[max(0, raw.start() - 40):raw.end() + 20]!r}")
    forged = [line for line in text.split("\n") if line.lstrip().startswith(FORGED)]
    if forged:
        found.append(f"{where} has a planted line of its own: {forged[0]!r}")
    found += [f"{where} shows the {kind} credential" for kind, secret in SECRETS.items()
              if secret in text or _markdown_escaped(secret) in text]
    if TRACEBACK in text:
        found.append(f"{where} holds a traceback")
    return found
