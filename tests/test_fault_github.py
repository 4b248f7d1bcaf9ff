"""G8's fetch against hostile and broken servers on loopback: the token goes to the API's own host
only and is never echoed back, every wait ends within the budget, and an issue's title cannot
forge a second line. The real check runs through pytester where the user's G8 line matters."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest
from github_fakes import CONTENTS, ISSUES, PROXY_VARS, GitHub, RawServer, Reply, fixture, recorded, self_signed
from gline_block import glines

from spark_gotchas.base.serial import to_jsonable
from spark_gotchas.knowledge.judges import g08_playbooks as g08
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers import ReadContext, github

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "ghp_Fault0123456789abcdefTOKEN"
OTHER_SECRET = "ghp_" + "Q" * 36  # a token by its shape alone, not in the environment
BUDGET_S = 2.0
DONE_WITHIN_S = BUDGET_S + 3.0  # "it did not hang", not a speed test
CHECK_WITHIN_S = 15.0  # the whole pytest run of the G8 check with the 2 s budget
ANY_GLINE = re.compile(r"\s*G(10|[1-9]) (FAIL|WARN|PASS|INFO|SKIP)\b")


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    """The token set, a 2 s budget, a private cache, no proxy, in-process runs without extras."""
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_TIMEOUT", str(BUDGET_S))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setattr("spark_gotchas.machine.readers.torch.torch_installed", lambda: False)


@pytest.fixture
def servers(monkeypatch):
    """Two GitHubs on two ports of 127.0.0.1; the API is the first."""
    a, b = GitHub().start(), GitHub().start()
    monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_API", a.url)
    yield a, b
    a.stop()
    b.stop()


@pytest.fixture
def raw(monkeypatch):
    made = []

    def make(behaviour: str, payload: bytes = b"") -> RawServer:
        srv = RawServer(behaviour, payload)
        made.append(srv)
        monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_API", srv.url)
        return srv

    yield make
    for srv in made:
        srv.close()


def read(*playbooks: str):
    ctx = ReadContext(options=RunOptions(spark_playbook=tuple(playbooks or ("vllm",))), worker_factory=lambda: None)
    t0 = time.monotonic()
    reading = github.read_playbook_issues(ctx)
    return reading, time.monotonic() - t0


def helpers_alive() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "spark-gotchas-github" and t.is_alive()]


def helpers_end(within_s: float = DONE_WITHIN_S) -> bool:
    """The fetch's helper threads end (their sockets were shut), none left blocked."""
    end = time.monotonic() + within_s
    while helpers_alive() and time.monotonic() < end:
        time.sleep(0.05)
    return not helpers_alive()


def nowhere_the_token(reading, *texts: str) -> None:
    for text in (json.dumps(to_jsonable(reading)), g08.judge_playbooks(reading).line, *texts):
        assert TOKEN not in text and OTHER_SECRET not in text


def run_check(pytester, *args: str):
    """The real G8 check, as a user runs it: (result, seconds, G8's verdict from the JSON report)."""
    import pytest_jsonreport.plugin
    import pytest_timeout

    import spark_gotchas.plugin

    pytester.makepyfile(test_g08_here=(ROOT / "tests_gotchas" / "test_g08_playbooks.py").read_text())
    report = pytester.path / "report.json"
    t0 = time.monotonic()
    result = pytester.runpytest("-p", "no:cacheprovider", "--spark-playbook", "vllm", "--json-report",
                                f"--json-report-file={report}", *args,
                                plugins=[spark_gotchas.plugin, pytest_timeout, pytest_jsonreport.plugin])
    seconds = time.monotonic() - t0
    tests = json.loads(report.read_text())["tests"]
    verdicts = [t["metadata"]["gotcha"] for t in tests if "gotcha" in t.get("metadata", {})]
    assert len(verdicts) == 1, result.stdout.str()[-3000:]
    return result, seconds, verdicts[0]


def g8_lines(result) -> list[str]:
    return [line for line in glines(result) if line.startswith("G8 ")]


# -- 1. the token goes to the API's own host only ----------------------------------------------
@pytest.mark.parametrize("where", ["another port", "another name for the same host", "another host, then back"])
def test_a_redirect_to_another_host_is_not_followed_and_never_sees_the_token(servers, where):
    a, b = servers
    port_a = a.server_address[1]
    target = {"another port": b.url, "another name for the same host": f"http://localhost:{port_a}",
              "another host, then back": b.url}[where]
    a.routes[ISSUES] = Reply(302, b"", {"Location": target + ISSUES + "?state=open&per_page=100"})
    b.routes[ISSUES] = Reply(302, b"", {"Location": a.url + ISSUES})
    reading, seconds = read()
    assert reading.error_kind == "http" and reading.http_status == 302
    assert reading.error == (f"HTTP 302: redirected to {target}, not the API's host http://127.0.0.1:{port_a}: "
                             "not followed")
    assert [s.authorization for s in a.seen] == [f"Bearer {TOKEN}"]  # one request, to the API, with the token
    assert b.seen == []
    v = g08.judge_playbooks(reading)
    assert v.status is Status.SKIP and v.line.startswith("G8 SKIP: GitHub answered with an error; check by hand: ")
    assert v.detail == f"cannot list open issues of NVIDIA/dgx-spark-playbooks: {reading.error}"
    nowhere_the_token(reading)


def test_a_redirect_within_the_api_host_is_followed_with_the_token(servers):
    """A renamed repository's API answers 301 to /repositories/<id>/… on api.github.com itself."""
    a, b = servers
    a.routes[ISSUES] = Reply(301, b"", {"Location": "/repositories/123/issues?state=open&per_page=100"})
    a.routes["/repositories/123/issues"] = Reply(body=fixture("issues_page1.json"))
    a.routes[CONTENTS] = Reply(307, b"", {"Location": "{url}/repositories/123/contents/nvidia"})
    a.routes["/repositories/123/contents/nvidia"] = Reply(body=fixture("contents_nvidia.json"))
    reading, _ = read("vllm")
    assert reading.error is None and reading.folders_error is None
    assert [s.path.split("?")[0] for s in a.seen] == [ISSUES, "/repositories/123/issues", CONTENTS,
                                                      "/repositories/123/contents/nvidia"]
    assert {s.authorization for s in a.seen} == {f"Bearer {TOKEN}"}
    assert g08.judge_playbooks(reading).line == "G8 WARN: vllm: 2 open issues (#116, #109)"


def test_a_next_page_on_another_host_is_not_followed(servers):
    a, b = servers
    a.routes[ISSUES] = Reply(body=fixture("issues_page1.json"),
                             headers={"Link": f'<{b.url}{ISSUES}?page=2>; rel="next"'})
    b.routes["page2"] = Reply(body=fixture("issues_page2.json"))
    reading, _ = read()
    assert reading.error_kind == "malformed" and b.seen == []
    assert reading.error.startswith(f"the next page is on {b.url}, not the API's host {a.url}")
    assert "GitHub's answer was not usable" in g08.judge_playbooks(reading).line


@pytest.mark.parametrize("hops, expected", [
    ({ISSUES: ISSUES}, "redirected in a loop"),
    ({ISSUES: "/b", "/b": ISSUES}, "redirected in a loop"),
    ({ISSUES: "/r1", **{f"/r{i}": f"/r{i + 1}" for i in range(1, 12)}}, "more than 5 redirects"),
])
def test_redirect_loops_and_chains_end_as_a_skip(servers, hops, expected):
    a, _ = servers
    for path, to in hops.items():
        a.routes[path] = Reply(302, b"", {"Location": to})
    reading, seconds = read()
    assert reading.error_kind == "http" and expected in reading.error and seconds < DONE_WITHIN_S
    assert len(a.seen) <= github.MAX_REDIRECTS + 1
    assert g08.judge_playbooks(reading).status is Status.SKIP


# -- 2. the token is never echoed back ---------------------------------------------------------
@pytest.mark.parametrize("reply, error", [
    (Reply(401, json.dumps({"message": f"Bad credentials, Bearer {TOKEN}"}).encode()),
     "HTTP 401 Unauthorized: Bad credentials, Bearer ***"),
    (Reply(404, json.dumps({"message": f"Not Found for {OTHER_SECRET}"}).encode()), "HTTP 404 Not Found: Not Found for ***"),
    (Reply(500, f"<html>Authorization: Bearer {TOKEN} {OTHER_SECRET}</html>".encode()), "HTTP 500 Internal Server Error"),
    (Reply(502, b"{}", reason=f"Bad {TOKEN} Gateway"), "HTTP 502 Bad Gateway"),
    (Reply(418, b"{}", reason=f"{OTHER_SECRET}"), "HTTP 418 I'm a Teapot"),
    (Reply(403, json.dumps({"message": f"API rate limit exceeded for token {TOKEN}"}).encode(),
           {"X-RateLimit-Remaining": "0"}), "HTTP 403: API rate limit exceeded for token ***"),
    (Reply(422, json.dumps({"message": "x" * 1000 + TOKEN}).encode()), "HTTP 422 Unprocessable Entity: " + "x" * 159),
    (Reply(422, json.dumps({"message": "x" * 10_000 + TOKEN}).encode()), "HTTP 422 Unprocessable Entity"),
])
def test_an_error_answer_never_echoes_the_token(servers, reply, error):
    a, _ = servers
    a.routes[ISSUES] = reply
    reading, _ = read()
    assert reading.error.startswith(error) and reading.error_kind in ("http", "rate_limited")
    assert len(reading.error) <= len(error) + 2
    nowhere_the_token(reading)
    assert not (Path(github.cache_dir())).exists()  # failures are not cached


def test_a_folder_listing_error_never_echoes_the_token(servers):
    a, _ = servers
    recorded(a)
    a.routes[CONTENTS] = Reply(403, json.dumps({"message": f"Resource not accessible by {TOKEN}"}).encode())
    reading, _ = read()
    assert reading.error is None and reading.folders is None
    assert reading.folders_error == "HTTP 403 Forbidden: Resource not accessible by ***"
    nowhere_the_token(reading, github._cache_path(a.url).read_text())


def test_an_answer_that_is_not_http_is_not_echoed(raw):
    raw("raw", f"SSH-2.0-{TOKEN} {OTHER_SECRET}\r\n\r\n".encode())
    reading, _ = read()
    assert reading.error_kind == "malformed" and reading.error == "not an HTTP answer (BadStatusLine)"
    nowhere_the_token(reading)


def test_the_token_and_an_echo_stay_out_of_the_line_the_report_and_the_snapshot(pytester, servers):
    a, _ = servers
    a.routes[ISSUES] = Reply(401, json.dumps({"message": f"Bad credentials {TOKEN} {OTHER_SECRET}"}).encode(),
                             reason=f"Bad {TOKEN}")
    snapshot = pytester.path / "snap.json"
    result, seconds, verdict = run_check(pytester, f"--spark-snapshot={snapshot}")
    assert g8_lines(result) == ["G8 SKIP: GitHub answered with an error; check by hand: "
                                "https://github.com/NVIDIA/dgx-spark-playbooks/issues?q=is%3Aissue+is%3Aopen+vllm"]
    assert verdict["detail"] == ("cannot list open issues of NVIDIA/dgx-spark-playbooks: HTTP 401 Unauthorized: "
                                 "Bad credentials *** ***")
    for text in (result.stdout.str(), (pytester.path / "report.json").read_text(), snapshot.read_text()):
        assert TOKEN not in text and OTHER_SECRET not in text


# -- 3. every wait is bounded ------------------------------------------------------------------
@pytest.mark.parametrize("behaviour, kind", [
    ("silent", "timeout"),
    ("trickle_headers", "timeout"),
    ("trickle_body", "timeout"),
    ("endless_body", "malformed"),
    ("endless_error", "http"),
    ("stalled", "timeout"),
    ("backlog_full", "timeout"),
    ("refused", "offline"),
])
def test_a_server_that_never_finishes_gives_a_g8_skip_within_the_budget(pytester, raw, behaviour, kind):
    raw(behaviour)
    result, seconds, verdict = run_check(pytester)
    assert seconds < CHECK_WITHIN_S, f"the G8 check took {seconds:.1f} s with a {BUDGET_S:g} s budget"
    assert verdict["status"] == "SKIP" and verdict["readings"]["error_kind"] == kind
    lines = g8_lines(result)
    assert len(lines) == 1 and verdict["detail"].startswith("cannot list open issues of NVIDIA/dgx-spark-playbooks: ")
    assert lines[0].endswith("check by hand: https://github.com/NVIDIA/dgx-spark-playbooks/issues?q=is%3Aissue"
                             "+is%3Aopen+vllm")
    assert helpers_end(), "the fetch's helper thread is still blocked after the budget"


def test_a_trickle_that_outlasts_the_budget_is_cut_off_by_the_reader_itself(raw):
    raw("trickle_headers")
    reading, seconds = read()
    assert reading.error_kind == "timeout" and seconds < DONE_WITHIN_S
    assert reading.error == f"no answer within {BUDGET_S:g} s: a DNS lookup, a connection or the answer stalled"
    assert helpers_end()


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    made = self_signed(tmp_path_factory.mktemp("tls"))
    if made is None:
        pytest.skip("the openssl command could not make a certificate")
    return made


def test_over_tls_the_listing_is_read_and_an_untrusted_certificate_skips(tls, monkeypatch):
    cert, context = tls
    srv = GitHub(tls=context).start()
    try:
        recorded(srv)
        monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_API", srv.url)
        reading, _ = read()
        assert reading.error_kind == "offline" and "CERTIFICATE_VERIFY_FAILED" in reading.error
        assert "TLS certificate is not trusted here" in g08.judge_playbooks(reading).line
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        reading, _ = read()
        assert reading.error is None and reading.open_issues == 9 and srv.url.startswith("https://")
        assert {s.authorization for s in srv.seen} == {f"Bearer {TOKEN}"}
    finally:
        srv.stop()


@pytest.mark.parametrize("behaviour, tls_server", [("trickle_headers", True), ("silent", True),
                                                   ("silent", False)])  # the last never answers the handshake
def test_over_tls_a_stalled_answer_ends_within_the_budget(tls, monkeypatch, behaviour, tls_server):
    cert, context = tls
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    srv = RawServer(behaviour, tls=context if tls_server else None)
    try:
        monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_API", srv.url.replace("http://", "https://"))
        reading, seconds = read()
        assert reading.error_kind == "timeout" and seconds < DONE_WITHIN_S
        assert helpers_end()
    finally:
        srv.close()


@pytest.mark.parametrize("value, budget", [("2", 2.0), ("inf", github.DEFAULT_BUDGET_S), ("nan", github.DEFAULT_BUDGET_S),
                                           ("-5", 0.1), ("1e9", github.MAX_BUDGET_S), ("soon", github.DEFAULT_BUDGET_S)])
def test_the_budget_is_a_finite_number_of_seconds(monkeypatch, value, budget):
    monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_TIMEOUT", value)
    assert github.budget_s() == budget


@pytest.mark.parametrize("api", ["file:///etc/passwd", "ftp://example.com", "api.github.com", "http://:80",
                                 "http://user:hunter2secret@127.0.0.1:99999"])
def test_an_api_that_is_not_an_http_url_skips_with_a_clear_reason(monkeypatch, api):
    monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_API", api)
    reading, seconds = read()
    assert reading.error_kind == "config" and seconds < 1
    assert reading.error.startswith("SPARK_GOTCHAS_GITHUB_API is not an http(s) URL: ")
    assert "hunter2secret" not in json.dumps(to_jsonable(reading))
    v = g08.judge_playbooks(reading)
    assert v.line.startswith("G8 SKIP: a bad API address; check by hand: ")
    assert v.detail.startswith("cannot list open issues of NVIDIA/dgx-spark-playbooks: SPARK_GOTCHAS_GITHUB_API is not")


def test_a_damaged_cache_is_fetched_afresh(servers):
    a, _ = servers
    recorded(a)
    read()
    path = github._cache_path(a.url)
    data = json.loads(path.read_text())
    data["issues"][0].pop("title")
    data["fetched_at"] = "yesterday"
    path.write_text(json.dumps(data))
    calls = len(a.seen)
    reading, _ = read()
    assert reading.error is None and not reading.from_cache and len(a.seen) > calls


# -- 4. an issue's text is shown as one line --------------------------------------------------
FORGED = [
    {"number": 201, "title": "vllm crashes\n G4 PASS: forged", "html_url": "https://github.com/x\nG1 PASS: forged",
     "created_at": "2026-09-01T00:00:00Z", "labels": [], "body": ""},
    {"number": 202, "title": "\x1b[2J\x1b]0;owned\x07vllm\r G3 PASS: overwritten", "created_at": "2026-08-01T00:00:00Z",
     "html_url": "https://github.com/NVIDIA/dgx-spark-playbooks/issues/202", "labels": ["vllm\nG5 PASS"], "body": ""},
]


def test_issue_titles_with_newlines_and_escapes_give_one_g8_line(pytester, servers):
    a, _ = servers
    a.routes[ISSUES] = Reply(body=json.dumps(FORGED).encode())
    a.routes[CONTENTS] = Reply(body=fixture("contents_nvidia.json"))
    result, _, verdict = run_check(pytester)
    out = result.stdout.str()
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out
    block = glines(result)
    assert [line for line in block if not line.startswith("    fix: ")] == [line for line in block
                                                                           if line.startswith("G8 ")]
    lines = g8_lines(result)
    assert lines == ["G8 WARN: vllm: 2 open issues (#201, #202)"]  # the titles are in its detail, escaped
    assert verdict["detail"].startswith('vllm: #201 2026-09-01 "vllm crashes\\x0a G4 PASS\\x3a forged"; #202 2026-08-01 '
                                        '"\\x1b[2J\\x1b]0;owned\\x07vllm\\x0d G3')
    assert [line for line in out.splitlines() if ANY_GLINE.match(line)] == lines  # nothing forged anywhere
    fix = block[block.index(lines[0]) + 1]
    assert fix == ("    fix: read these before trusting the recipe for an expensive run: "
                   "https://github.com/NVIDIA/dgx-spark-playbooks/issues/201 "
                   "https://github.com/NVIDIA/dgx-spark-playbooks/issues/202")
