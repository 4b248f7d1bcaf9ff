"""Time the suite's text transformations on adversarial text: masking, neutralising, folding, parsing.

Each case is one kind of text a quadratic pattern chokes on (a long run of name characters, of
``key=``, of ``=``/``:``, of quotes, of URL-like text, of ``--flag`` runs, of ``Bearer `` …), built
at ``--size`` characters, and every transformation it meets on its way out is timed: the masker
(``scrub.mask_text``), the neutraliser (``text.printable``), the G-line folding of a fix
(``reports.wrapped``), and the parsers of outside text (a launch script's ``${VAR:-default}``,
``Requires-Dist:`` lines, a reason's clauses). ``tests/test_linear_text.py`` runs this and bounds
every figure; docs/benchmarks.md records them.

    python devscripts/text_timing.py --size 524288            # this tree
    python devscripts/text_timing.py --size 20000 --rev f8cc859   # the masker of another commit
    python devscripts/text_timing.py --size 524288 --json     # one JSON object per case and step

With ``--rev`` only the masker is taken from that commit (``git show REV:spark_gotchas/base/scrub.py``),
the steps that are not the masker are left out. A case's line is printed as soon as it is done, so
a run stopped after a timeout still says which case was slow.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# name -> a text of about n characters
CASES: dict[str, Callable[[int], str]] = {
    "name characters": lambda n: "a" * n,
    "key= runs": lambda n: "a=" * (n // 2),
    "secret key= runs": lambda n: "token=" * (n // 6),
    "= and : runs": lambda n: "=:" * (n // 2),
    "quotes": lambda n: "\"'" * (n // 2),
    "unclosed quoted values": lambda n: 'password="' * (n // 10),
    "secret names before a quote never closed": lambda n: "api_key: 'a " * (n // 12),
    "URL-like text": lambda n: "a.b+" * (n // 4),
    "schemes": lambda n: "x://" * (n // 4),
    "userinfo": lambda n: "https://" + "u:" * (n // 2),
    "--flag runs": lambda n: "--a." * (n // 4),
    "--secret-flag= runs": lambda n: "--token=." * (n // 9),
    "Bearer runs": lambda n: "Bearer " * (n // 7),
    "one vllm serve argument": lambda n: "vllm serve org/model --hf-overrides " + '{"rope_scaling":{"type":"yarn"}}' * (n // 32),
    "--secret-flag -value runs": lambda n: "--token -" * (n // 9),
    "token prefixes glued": lambda n: "ghp_npm_AIzasq0atp-" * (n // 19),
    "token prefixes short of a body": lambda n: "ghp_abc npm_abc sk_live_a AIza- " * (n // 32),
    "JWT-like runs without their dots": lambda n: " eyJ" + "a" * 40 + ".ey" * (n // 3),
    "JWT-like words": lambda n: " eyJhbGciOiJIUzI1NiJ9.eyJ" * (n // 26),
    "every token family's start": lambda n: _family_starts(n),
    "PEM BEGIN without an END": lambda n: "-----BEGIN RSA PRIVATE KEY-----A " * (n // 33),
    "PEM END without a BEGIN": lambda n: "-----END RSA PRIVATE KEY-----" * (n // 29),
    "client commands": lambda n: "mysql -p curl -u a: sshpass -p " * (n // 31),
    "one client command's words": lambda n: "mysql" + " -u a:b -pX" * (n // 11),
    "percent-encoded names": lambda n: "password%3D%22" * (n // 14),
    "no-break spaces after names": lambda n: "token=\u00a0\u200b" * (n // 8),
    "zero-width and bidi controls": lambda n: "a\u200b\u202e\U000e0041\ufeff" * (n // 5),
}


def _family_starts(n: int) -> str:
    """Every prefix the masker knows, each followed by less than its body needs."""
    from spark_gotchas.base import scrub

    starts = [p + "a" for prefixes, _body, _word in scrub._families() for p in prefixes]
    unit = " ".join(starts) + " "
    return (unit * (n // len(unit) + 1))[:n]
# name -> (a text of about n characters, what parses it)
PARSES: dict[str, tuple[Callable[[int], str], str]] = {
    "unclosed ${VAR:- in a launch script": (lambda n: "${a:-" * (n // 5), "launch"),
    "Requires-Dist: lines with an open [": (lambda n: "Requires-Dist: a [\n" * (n // 19), "requires"),
    "a reason of many clauses": (lambda n: "a: " * (n // 3), "reason"),
}


def masker_of(rev: str):
    """``spark_gotchas.base.scrub`` as it was at ``rev``, loaded under another name."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:spark_gotchas/base/scrub.py"], check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "scrub_at_rev.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("scrub_at_rev", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def steps(rev: str | None) -> dict[str, Callable[[str], object]]:
    if rev:
        old = masker_of(rev)
        return {"mask": lambda text: old.mask_text(text, [])}
    from spark_gotchas.base import scrub
    from spark_gotchas.base.text import printable
    from spark_gotchas.outputs import reports

    return {"mask": lambda text: scrub.mask_text(text, []), "neutralise": lambda text: printable(text, limit=0),
            "fold": lambda text: reports.wrapped("    fix: " + text, 100)}


def parser(kind: str) -> Callable[[str], object]:
    from spark_gotchas import plugin
    from spark_gotchas.machine.readers import env, launch

    return {"launch": lambda text: launch.expand(text, {}), "requires": env.REQUIRES.findall,
            "reason": lambda text: plugin.unreadable(1, "key", text)}[kind]


def timed(work: Callable[[str], object], text: str) -> float:
    start = time.perf_counter()
    work(text)
    return time.perf_counter() - start


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--size", type=int, default=512 * 1024, help="characters per case (default 524288)")
    args.add_argument("--rev", help="time the masker of this git revision instead of this tree's")
    args.add_argument("--json", action="store_true", help="one JSON object per line: case, step, chars, seconds")
    opts = args.parse_args()
    work = [(name, build(opts.size), step, fn) for name, build in CASES.items() for step, fn in steps(opts.rev).items()]
    if not opts.rev:
        work += [(name, build(opts.size), "parse", parser(kind)) for name, (build, kind) in PARSES.items()]
    for name, text, step, fn in work:
        seconds = timed(fn, text)
        if opts.json:
            line = json.dumps({"case": name, "step": step, "chars": len(text), "seconds": round(seconds, 4)})
        else:
            line = f"{name:<38} {step:<10} {len(text):>9} chars {seconds:8.3f} s"
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
