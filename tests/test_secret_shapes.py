"""Credentials in the shapes users carry, masked whatever they start with: a secret flag's value
that starts with a dash, a PEM private key from BEGIN to END, the token families of a maintained
rule set (gitleaks'), the password arguments of common clients, a no-break space after ``=``, a
percent-encoded ``password%3D…``; and masking before every cut, so a token cut in two keeps no
part of itself in clear."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

from spark_gotchas.base import scrub
from spark_gotchas.base.text import printable

ROOT = Path(__file__).resolve().parents[1]
PEM_BODY = ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
            "QyNTUxOQAAACBPlantedKeyBodyLine2xyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxy")
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END OPENSSH PRIVATE KEY-----"


def clean(text: str, *secrets: str) -> bool:
    return not any(s in text for s in secrets)


# -- a secret flag's value is its next argument, whatever it starts with ------------------------------
def test_the_issues_vllm_command_line_keeps_none_of_its_three_values():
    argv = ["vllm", "serve", "org/model", "--api-key", "-PlantedKey", "--password", "--Pw2",
            "--ssh-private-key", PEM, "--port", "8000"]
    masked = scrub.mask_argv(argv)
    assert masked[:4] == ["vllm", "serve", "org/model", "--api-key"] and masked[-2:] == ["--port", "8000"]
    joined = " ".join(masked)
    assert clean(joined, "PlantedKey", "Pw2", *PEM_BODY, "BEGIN OPENSSH"), joined
    text = scrub.mask_text(" ".join(argv))  # the same line as text (a launch script, a G6 line)
    assert clean(text, "PlantedKey", "Pw2", *PEM_BODY), text
    assert text.endswith("--port 8000")


@pytest.mark.parametrize("argv, secret", [
    (["app", "--token", "-x"], "-x"),
    (["app", "--hf-token", "--"], "--"),
    (["app", "--db-password", "---"], "---"),
    (["app", "--token", "--api-key", "S3cretValue"], "S3cretValue"),  # whichever flag took a value
    (["app", "--client-secret", "-5"], "-5"),
])
def test_a_dash_led_value_after_a_secret_flag_is_masked(argv, secret):
    masked = scrub.mask_argv(argv)
    assert secret not in masked[2:], masked
    assert len(masked) == len(argv)


def test_a_flag_that_is_no_secret_keeps_its_dash_led_value():
    assert scrub.mask_argv(["app", "--tokenizer", "-x", "--lr", "-1e-4"]) == ["app", "--tokenizer", "-x", "--lr", "-1e-4"]
    assert scrub.mask_text("--max-num-batched-tokens -1 --seed -3") == "--max-num-batched-tokens -1 --seed -3"


# -- a PEM block is one secret -------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    PEM,
    "PRIVATE_KEY=" + PEM,
    "key: " + PEM + " then more",
    PEM.replace("\n", "\r\n"),
    repr("PRIVATE_KEY=" + PEM),  # as repr shows it: \n written out
    printable("PRIVATE_KEY=" + PEM, limit=0),  # as the escaper shows it: \x0a
    json.dumps({"env": {"PRIVATE_KEY": PEM}}),
    PEM.replace("OPENSSH PRIVATE KEY", "RSA PRIVATE KEY"),
    PEM.replace("OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY"),
    PEM.replace("OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK"),
    PEM.rsplit("\n", 1)[0],  # cut before its END
    PEM.rsplit("\n", 2)[0],  # cut inside its body
])
def test_a_pem_private_key_is_masked_from_begin_to_end(text):
    masked = scrub.mask_text(text, [])
    assert clean(masked, *PEM_BODY, *[line[:16] for line in PEM_BODY]), masked


def test_text_around_a_pem_block_and_a_certificate_are_kept():
    cert = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----"
    masked = scrub.mask_text(f"before {PEM} after {cert}", [])
    assert masked == f"before *** after {cert}"


def test_two_pem_blocks_and_one_cut_short_are_each_masked():
    second = PEM.replace("OPENSSH", "EC").replace("Planted", "Second")
    masked = scrub.mask_text(f"a {PEM} b {second} c {PEM.rsplit(chr(10), 2)[0]}", [])
    assert masked.startswith("a *** b *** c ***"), masked


# -- token families: the suite's own and gitleaks' ---------------------------------------------------------
ISSUE_TOKENS = {
    "a bare JWT": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
                  "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "Stripe": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "npm": "npm_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "Google": "AIza" + "SyD-abcdefghijklmnopqrstuvwxyz12345",
    "PyPI": "pypi-AgEIcHlwaS5vcmc" + "CJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0NTY3ODkw",
}


@pytest.mark.parametrize("name", list(ISSUE_TOKENS))
@pytest.mark.parametrize("around", ["{}", "token is {} here", "({})", '"{}"', "x={}", "\\x0a{}", "Bearer-less {},"])
def test_the_token_families_the_issue_names_are_masked(name, around):
    token = ISSUE_TOKENS[name]
    masked = scrub.mask_text(around.format(token), [])
    assert token[-12:] not in masked and token[8:20] not in masked, masked


FAMILIES = ROOT / "spark_gotchas" / "base" / "token_families.json"


def _families() -> list[dict]:
    return json.loads(FAMILIES.read_text())["families"]


def _sample(family: dict, prefix: str) -> str:
    """A made-up token of ``family``: its prefix, then each part of its body with a few more
    characters than it needs, drawn from the part's class."""
    out = prefix
    for part in family["body"]:
        if isinstance(part, str):
            out += part
            continue
        klass, least = part
        chars = [c for c in string.ascii_letters + string.digits + "-_.+/=" if re.fullmatch(klass, c)]
        if least:
            out += "".join(chars[(i * 7) % len(chars)] for i in range(least + 3))
    return out


@pytest.mark.parametrize("family", _families(), ids=lambda f: f["id"])
def test_every_family_of_the_rule_set_masks_a_token_of_its_shape(family):
    for prefix in family["prefixes"]:
        token = _sample(family, prefix)
        masked = scrub.mask_text(f"seen {token} end", [])
        assert masked == "seen *** end", (token, masked)


def test_the_rule_set_is_shipped_with_its_licence_and_said_in_the_docs():
    data = json.loads(FAMILIES.read_text())
    assert scrub.FAMILIES_FILE == FAMILIES
    assert data["license"] == "MIT" and "gitleaks" in data["source"]
    notice = "\n".join(data["notice"])
    assert "MIT License" in notice and "Copyright (c)" in notice and "Permission is hereby granted" in notice
    assert len(data["families"]) >= 80
    security = (ROOT / "docs" / "security.md").read_text()
    assert "token_families.json" in security and "gitleaks" in security and "MIT" in security
    assert '"token_families.json"' in (ROOT / "pyproject.toml").read_text()  # in the wheel


@pytest.mark.parametrize("text", [
    "GPU-2f1e3c4d-1234-5678-9abc-def012345678",
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    "nvidia-cublas-cu12==12.8.4.1 torch-2.13.0+cu130-cp311-cp311-manylinux_2_28_aarch64.whl",
    "/usr/local/lib/python3.12/dist-packages/flash_attn_2_cuda.cpython-312-aarch64-linux-gnu.so",
    "keyJustAWordWithManyLettersInIt.eyeballs_and_more_words_that_are_long",
    "task-abcdefghijklmnopqrstuvwxyz disk-0123456789abcdef0123",
    "the skeleton sk-learn s.t. SKU SG.1 API-docs pat.sh",
    "max_num_batched_tokens=8192 --tokenizer org/tok --max-model-len 4096",
    "nvcr.io/nvidia/pytorch:25.09-py3 unsloth/unsloth:latest",
])
def test_what_the_suite_reads_every_day_is_not_taken_for_a_token(text):
    assert scrub.mask_text(text, []) == text


# -- password arguments of common clients ---------------------------------------------------------------
@pytest.mark.parametrize("command, secret", [
    ("mysql -u root -pHunter2Pw db", "Hunter2Pw"),
    ("/usr/bin/mysqldump -h db -p'Hunter2Pw' --all", "Hunter2Pw"),
    ("mariadb -pHunter2Pw", "Hunter2Pw"),
    ("curl -u alice:Hunter2Pw https://x.example/", "Hunter2Pw"),
    ("curl -ualice:Hunter2Pw https://x.example/", "Hunter2Pw"),
    ("curl --user 'alice:Hunter2Pw' https://x.example/", "Hunter2Pw"),
    ("curl --proxy-user bob:Hunter2Pw -x p:3128 u", "Hunter2Pw"),
    ("redis-cli -h cache -a Hunter2Pw ping", "Hunter2Pw"),
    ("redis-cli --pass Hunter2Pw", "Hunter2Pw"),
    ("sshpass -p Hunter2Pw ssh -p 2222 user@host", "Hunter2Pw"),
    ("sshpass -pHunter2Pw scp a b", "Hunter2Pw"),
    ("docker login -u me -p Hunter2Pw registry.example", "Hunter2Pw"),
    ("ldapsearch -x -D cn=admin -w Hunter2Pw -b dc=x", "Hunter2Pw"),
    ("sqlcmd -S db -U sa -P Hunter2Pw", "Hunter2Pw"),
    ("smbclient //h/share -U alice%Hunter2Pw", "Hunter2Pw"),
    ("openssl enc -aes256 -pass pass:Hunter2Pw -in f", "Hunter2Pw"),
    ("cd /x && mysql -pHunter2Pw", "Hunter2Pw"),
])
def test_a_clients_password_argument_is_masked_as_text_and_as_argv(command, secret):
    assert secret not in scrub.mask_text(command, []), scrub.mask_text(command, [])
    argv = command.replace("'", "").split()
    assert not any(secret in tok for tok in scrub.mask_argv(argv)), scrub.mask_argv(argv)


@pytest.mark.parametrize("command", [
    "sshpass -p Hunter2Pw ssh -p 2222 user@host",
    "docker run -p 8080:80 -u 1000:1000 image",
    "mysql -p db",  # -p alone prompts: db is the database
    "curl -u alice https://x.example/",  # no password given: curl asks
    "ssh -p 22 host; redis-server --port 6379",
])
def test_a_clients_other_arguments_are_kept(command):
    kept = {"sshpass -p Hunter2Pw ssh -p 2222 user@host": "ssh -p 2222 user@host"}.get(command, command)
    assert kept in scrub.mask_text(command, [])


# -- what may stand between a name and its value -------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "password=\u00a0Hunter2Pw", "password =\u2003Hunter2Pw", "password\u200b=Hunter2Pw", "api_key:\ufeffHunter2Pw",
    "--api-key\u00a0Hunter2Pw", "--hf-token\u202fHunter2Pw",
    "https://x/?next=%2Flogin%3Fpassword%3DHunter2Pw%26u%3D1", "token%3dHunter2Pw", "%22password%22%3A%22Hunter2Pw%22",
])
def test_a_value_after_a_no_break_space_or_a_percent_encoded_equals_sign_is_masked(text):
    assert "Hunter2Pw" not in scrub.mask_text(text, [])
    assert "Hunter2Pw" not in scrub.mask_text(printable(text, limit=0), [])  # escaped first, masked after


# -- mask first, then cut -----------------------------------------------------------------------------------
@pytest.mark.parametrize("token, secret", [
    ("ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    (ISSUE_TOKENS["a bare JWT"], ISSUE_TOKENS["a bare JWT"][3:]),
    (ISSUE_TOKENS["Stripe"], ISSUE_TOKENS["Stripe"][8:]),
    (ISSUE_TOKENS["npm"], ISSUE_TOKENS["npm"][4:]),
    ("https://user:Hunter2Password@host.example/x", "Hunter2Password"),
    ("--api-key -Hunter2Password", "Hunter2Password"),
    (PEM, "".join(PEM_BODY)),
])
def test_a_cut_through_a_token_keeps_none_of_it(token, secret):
    """Cut at every place, after every length of text before it: no 6 characters of the secret in clear."""
    secret = secret.replace("\n", "")
    for before in range(0, 50, 7):
        text = "GPU-0," * before + token + ",1"
        for room in range(8, len(text) + 2, 3):
            shown = scrub.clip(text, room)
            assert len(shown) <= room
            assert not any(secret[i:i + 6] in shown for i in range(0, len(secret) - 6)), (room, shown)


# -- every place a string from outside is cut: one test per kind of place ------------------------------
TOKEN = "ghp_Ab3dEf6hIj9kLm2oPq5sTu8wXy1zAb4dEf7h"


def _no_part(text: str, secret: str = TOKEN[4:]) -> bool:
    return not any(secret[i:i + 6] in text for i in range(len(secret) - 6))


@pytest.mark.parametrize("room", range(20, 60))
def test_verdict_clipped_masks_before_it_cuts(room):
    from spark_gotchas.knowledge.verdict import clipped

    assert _no_part(clipped("0,1,2,3,4,5,6,7,8,9," + TOKEN + " rest", room))


def test_a_judge_cutting_a_replayed_value_to_fit_its_line_cuts_it_masked(tmp_path):
    """G1's visibility line cut CUDA_VISIBLE_DEVICES at 40 characters: ``ghp_`` and 14 of the
    token's characters stayed in clear, under the 16 its shape needs (the terminal, the JSON report,
    the JUnit XML and the drain reason sinfo -R shows every user)."""
    import test_fuzz as fuzz

    from spark_gotchas.commands.slurm import drain
    from spark_gotchas.machine.snapshot import Snapshot

    readings = json.loads((ROOT / "tests" / "fixtures" / "h200" / "preflight-snapshot.json").read_text())["readings"]
    readings["torch.build"].update(cuda_available=False, device_count=0, devices=[])
    readings["gpu.visibility"] = {"pci_gpus": [], "pci_error": None, "dev_nodes": ["/dev/nvidia0"],
                                  "nvidia_visible_devices": None, "cuda_visible_devices": "0,1,2,3,4,5,6,7,8,9,1," + TOKEN,
                                  "image_vars": {}, "container": None}
    spark = fuzz.ReplaySpark(Snapshot(readings=readings, options={}, path="cvd.json"), "auto")
    (check,) = [c for c in fuzz.CHECKS if c.__name__ == "test_g1_gpu_visible_here"]
    check(spark)
    verdict = spark.verdicts[-1]
    assert verdict.line == ("G1 FAIL: NVML sees 1 GPU(s) but torch sees none: "
                            "CUDA_VISIBLE_DEVICES='0,1,2,3,4,5,6,7,8,9,1,***' hides it")
    shown = [verdict.line, json.dumps(verdict.to_json()), drain.reason(drain.Outcome((), (verdict.line,)))]
    assert all(_no_part(text) for text in shown), shown


def test_a_reader_cutting_what_it_reads_masks_first(monkeypatch):
    """The reader keeps 200 characters of CUDA_VISIBLE_DEVICES and of NGC's image variables, G8
    1,000 of an issue's title: a token across the cut was kept in part in the snapshot."""
    from spark_gotchas.machine.readers import github
    from spark_gotchas.machine.readers.gpu import read_visibility

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0," * 95 + TOKEN)
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "x" * 190 + TOKEN)
    vis = read_visibility(None)
    assert _no_part(vis.cuda_visible_devices) and _no_part(json.dumps(vis.image_vars))
    trimmed = github._trim({"number": 1, "title": "t" * 990 + TOKEN, "labels": ["l" * 90 + TOKEN],
                            "body": "b" * (github.BODY_CHARS_KEPT - 10) + " " + TOKEN})
    assert _no_part(json.dumps(trimmed))


def test_an_error_text_cut_to_a_line_masks_first():
    """A command's last line (procs), a child's stderr (the GPU worker): cut to 160 and 200."""
    from spark_gotchas.base.procs import BoundedRun
    from spark_gotchas.runtime.worker import TaskResult

    run = BoundedRun(command=("nvidia-smi",), returncode=1, stderr="x" * 150 + " " + TOKEN)
    assert _no_part(run.problem) and run.problem.startswith("nvidia-smi exited 1: ")
    crash = TaskResult(ok=False, crashed=True, signal="SIGSEGV", stderr_tail="e" * 190 + TOKEN)
    assert _no_part(crash.problem)


@pytest.mark.parametrize("limit", range(20, 80, 3))
def test_a_measurement_cuts_its_error_at_a_words_end(limit):
    """microbench imports nothing of the suite: it cuts at a word's end, so the suite masks the whole token."""
    from spark_gotchas.microbench import _cli

    error = RuntimeError("CUDA error: an illegal memory access, token " + TOKEN + " more")
    text = _cli.first_line(error, limit)
    assert len(text) <= limit and (TOKEN in text or TOKEN[:4] not in text)
    assert _no_part(scrub.mask_text(text, []))


def test_the_doors_own_cuts_keep_no_part_of_a_token():
    """The line cut at 16,000 characters, the drain reason at 255 bytes, a misfit's value at 40."""
    from spark_gotchas.base import outward, serial
    from spark_gotchas.commands.slurm import drain

    for pad in range(15_990, 16_010):
        assert _no_part(outward.line("x" * pad + TOKEN, limit=16_000))
    for pad in range(200, 260, 2):
        assert _no_part(drain.reason(drain.Outcome((), ("G1 FAIL: " + "y" * pad + TOKEN,))))
    with pytest.raises(serial.Misfit) as misfit:
        serial.from_jsonable(int, "z" * 30 + TOKEN)
    assert _no_part(str(misfit.value))


def test_no_module_cuts_an_f_string_from_outside_without_masking_it_first():
    """The class, kept: a slice ``[:N]`` of an f-string, ``str()`` or ``repr()`` in the suite's
    modules, which the masker would see cut. Judges are left out: every string of a reading they
    judge was masked when the reading was built (serial.from_jsonable)."""
    import ast

    found = []
    for path in sorted((ROOT / "spark_gotchas").rglob("*.py")):
        if "judges" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.lower is None \
                    and node.slice.upper is not None:
                value = node.value
                call = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("str", "repr")
                if isinstance(value, ast.JoinedStr) or call:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], found
