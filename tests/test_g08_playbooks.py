"""G8 against a real HTTP server on loopback serving recorded GitHub answers: every outcome is quick."""

import json
import time

import pytest
from github_fakes import CONTENTS, ISSUES, PROXY_VARS, GitHub, Reply, fixture, recorded

from spark_gotchas.base.serial import from_jsonable, to_jsonable
from spark_gotchas.knowledge.judges import g08_playbooks as g08
from spark_gotchas.knowledge.readings.github import PlaybookIssues
from spark_gotchas.knowledge.verdict import Status
from spark_gotchas.machine.options import RunOptions
from spark_gotchas.machine.readers import ReadContext, github

TOKEN = "ghp_test0123456789abcdefSECRET"


@pytest.fixture
def server(monkeypatch, tmp_path):
    srv = GitHub().start()
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_API", srv.url)
    monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_TIMEOUT", "1.5")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    yield srv
    srv.stop()


# The budget these reads get is 1.5 s (SPARK_GOTCHAS_GITHUB_TIMEOUT below); the slow server answers
# after 5 s and the trickling one never ends: a read that took this long waited past its budget.
# The slack beyond the budget is for a loaded CI box; this is "it did not wait", not a speed test.
WAITED_AT_MOST_S = 4.5


def read(*playbooks):
    ctx = ReadContext(options=RunOptions(spark_playbook=tuple(playbooks)), worker_factory=lambda: None)
    t0 = time.monotonic()
    reading = github.read_playbook_issues(ctx)
    return reading, time.monotonic() - t0


def test_open_issues_of_a_playbook_warn_newest_first_without_pull_requests(server):
    recorded(server)
    reading, _ = read("unsloth", "vllm")
    assert reading.open_issues == 9 and reading.pull_requests_skipped == 3 and not reading.from_cache
    assert [i.number for i in reading.by_playbook["unsloth"]] == [85, 57]  # PR #14 excluded
    assert [i.number for i in reading.by_playbook["vllm"]] == [116, 109]
    v = g08.judge_playbooks(reading)
    assert v.status is Status.WARN
    assert v.line == "G8 WARN: unsloth: 2 open issues (#85, #57); vllm: 2 open issues (#116, #109)"
    assert v.detail.startswith('unsloth: #85 2026-07-17 "Unsloth playbook: test_unsloth.py '
                               'trains a broken model (fl…"; #57 2026-01-30 ')
    assert '; vllm: #116 2026-08-31 "[Bug]: DGX Spark GB10' in v.detail
    assert v.fix.startswith("read these before trusting the recipe for an expensive run: "
                            "https://github.com/NVIDIA/dgx-spark-playbooks/issues/85 ")


def test_names_match_whole_words_with_any_separator(server):
    recorded(server)
    reading, _ = read("nccl", "connect-two-sparks", "llama-factory")
    assert [i.number for i in reading.by_playbook["nccl"]] == [102, 7]
    assert [i.number for i in reading.by_playbook["connect-two-sparks"]] == [25]
    assert reading.by_playbook["llama-factory"] == []  # only a pull request mentions it
    assert reading.by_playbook["nccl"][0].matched == ["title", "body"]


def test_no_open_issue_passes_and_the_second_run_uses_the_cache(server):
    recorded(server)
    reading, _ = read("ollama")
    v = g08.judge_playbooks(reading)
    assert v.line == "G8 PASS: no open issue mentions ollama (9 checked)"
    assert v.detail == "9 open issues of NVIDIA/dgx-spark-playbooks checked"
    calls = len(server.seen)
    server.routes.clear()  # the API is gone: the cache must answer
    again, _ = read("ollama")
    assert len(server.seen) == calls and again.from_cache and again.open_issues == 9
    assert g08.judge_playbooks(again).detail == "9 open issues of NVIDIA/dgx-spark-playbooks checked, cached 0 min ago"


def test_an_expired_cache_is_fetched_again(server):
    recorded(server)
    read("vllm")
    path = github._cache_path(server.url)
    data = json.loads(path.read_text())
    data["fetched_at"] -= github.CACHE_TTL_S + 1
    path.write_text(json.dumps(data))
    calls = len(server.seen)
    again, _ = read("vllm")
    assert not again.from_cache and len(server.seen) > calls


def test_an_empty_repository_passes(server):
    server.routes[ISSUES] = Reply(body=b"[]")
    server.routes[CONTENTS] = Reply(body=fixture("contents_nvidia.json"))
    reading, _ = read("vllm")
    assert reading.open_issues == 0 and g08.judge_playbooks(reading).status is Status.PASS


def test_rate_limited_skips_with_the_reset_time_and_the_url(server):
    reset = int(time.time()) + 1800
    server.routes[ISSUES] = Reply(403, fixture("rate_limited.json"),
                                  {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)})
    reading, seconds = read("vllm")
    assert reading.error_kind == "rate_limited" and reading.http_status == 403
    v = g08.judge_playbooks(reading)
    assert v.status is Status.SKIP
    assert v.line.startswith(f"G8 SKIP: GitHub's rate limit is used up until {github._iso(reset)} (set GITHUB_TOKEN); "
                             "check by hand: ")
    assert v.detail.startswith("cannot list open issues of NVIDIA/dgx-spark-playbooks: HTTP 403: API rate limit exceeded")
    assert v.line.endswith("check by hand: https://github.com/NVIDIA/dgx-spark-playbooks/issues?q=is%3Aissue+is%3Aopen"
                           "+vllm")
    assert not github._cache_path(server.url).exists()  # failures are not cached


def test_a_server_error_skips(server):
    server.routes[ISSUES] = Reply(500, b'{"message": "Server Error"}')
    reading, _ = read("vllm")
    assert reading.error_kind == "http" and reading.http_status == 500
    assert "GitHub answered with an error" in g08.judge_playbooks(reading).line
    assert "HTTP 500 Internal Server Error: Server Error" in reading.error


def test_a_slow_server_skips_within_the_budget(server):
    server.routes[ISSUES] = Reply(body=b"[]", delay_s=5)
    reading, seconds = read("vllm")
    assert reading.error_kind == "timeout" and seconds < WAITED_AT_MOST_S
    assert g08.judge_playbooks(reading).status is Status.SKIP


def test_a_trickling_server_skips_within_the_budget(server):
    server.routes[ISSUES] = Reply(body=fixture("issues_page2.json"), trickle=True)
    reading, seconds = read("vllm")
    assert reading.error_kind == "timeout" and seconds < WAITED_AT_MOST_S


def test_malformed_json_skips(server):
    server.routes[ISSUES] = Reply(body=b'[{"number": 1, "title": ')
    reading, _ = read("vllm")
    assert reading.error_kind == "malformed" and reading.error.startswith("the response is not JSON")
    assert "GitHub's answer was not usable" in g08.judge_playbooks(reading).line


def test_no_server_at_all_skips_quickly(server, monkeypatch):
    closed = server.url
    server.shutdown()
    server.server_close()
    monkeypatch.setenv("SPARK_GOTCHAS_GITHUB_API", closed)
    reading, seconds = read("vllm")
    assert reading.error_kind == "offline" and "Connection refused" in reading.error and seconds < WAITED_AT_MOST_S
    assert "no network" in g08.judge_playbooks(reading).line


def test_the_token_is_sent_but_never_recorded(server, monkeypatch):
    recorded(server)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    reading, _ = read("vllm")
    assert server.seen[0].authorization == f"Bearer {TOKEN}" and reading.authenticated
    assert TOKEN not in json.dumps(to_jsonable(reading))
    assert TOKEN not in github._cache_path(server.url).read_text()


def test_an_unknown_playbook_name_warns_with_a_suggestion(server):
    recorded(server)
    reading, _ = read("vllms")
    v = g08.judge_playbooks(reading)
    assert v.status is Status.WARN and "vllms is not a playbook folder (did you mean vllm?)" in v.line
    assert "name playbooks by their folder under nvidia/: connect-two-sparks, " in v.fix


def test_no_playbook_named_is_info_and_asks_nothing_of_the_network(server):
    reading, _ = read()
    assert not reading.fetched and server.seen == []
    v = g08.judge_playbooks(reading)
    assert v.line == "G8 INFO: no playbook named (--spark-playbook NAME lists its open issues)"
    assert v.detail.startswith("NAME is a folder of NVIDIA/dgx-spark-playbooks/nvidia/, e.g. vllm, unsloth")


def test_the_reading_round_trips_through_json(server):
    recorded(server)
    reading, _ = read("unsloth", "nccl")
    back = from_jsonable(PlaybookIssues, json.loads(json.dumps(to_jsonable(reading))))
    assert back == reading and g08.judge_playbooks(back).line == g08.judge_playbooks(reading).line
