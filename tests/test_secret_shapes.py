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

from spark_gotchas import scrub
from spark_gotchas.text import printable

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


FAMILIES = ROOT / "spark_gotchas" / "token_families.json"


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
