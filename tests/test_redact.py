from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
from conftest import make_config

from hermes_trove.config import load_config
from hermes_trove.payloads.redact import Redactor, describe_config

ALL = Redactor(True, ("private_key", "api_key", "bearer_token", "password_assignment"))


def short(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:8]


@pytest.mark.parametrize("text, expected", [
    ("OPENAI_API_KEY=sk-abc123def456", "OPENAI_API_KEY=[REDACTED:api_key:sha256={d}]"),
    ('{"api_key": "sk-live-xyz"}', '{"api_key": "[REDACTED:api_key:sha256={d}]"}'),
    ("x-api-key: abcdef12345", "x-api-key: [REDACTED:api_key:sha256={d}]"),
    ("access_token = 'ya29.a0Af'", "access_token = '[REDACTED:api_key:sha256={d}]'"),
    ('"client_secret":"c-s-3cr3t"', '"client_secret":"[REDACTED:api_key:sha256={d}]"'),
    ("AWS_SECRET_KEY := wJalrXUtnFEMI", "AWS_SECRET_KEY := [REDACTED:api_key:sha256={d}]"),
    ("api-token=>tok_998877", "api-token=>[REDACTED:api_key:sha256={d}]"),
])
def test_api_key_assignments_and_json_keys_are_redacted_with_a_digest(text, expected):
    value = next(v for v in ("sk-abc123def456", "sk-live-xyz", "abcdef12345", "ya29.a0Af", "c-s-3cr3t",
                             "wJalrXUtnFEMI", "tok_998877") if v in text)
    assert ALL.redact(text) == expected.replace("{d}", short(value))


def test_bearer_tokens_in_headers_and_token_json_keys_are_redacted():
    assert ALL.redact("Authorization: Bearer eyJhbGciOi.abc-def_123") == \
        f"Authorization: Bearer [REDACTED:bearer_token:sha256={short('eyJhbGciOi.abc-def_123')}]"
    assert ALL.redact('{"refresh_token": "r1-abc", "id": 3}') == \
        f'{{"refresh_token": "[REDACTED:bearer_token:sha256={short("r1-abc")}]", "id": 3}}'
    assert ALL.redact('{"authorization": "Basic dXNlcg=="}').startswith('{"authorization": "[REDACTED:')


def test_prose_that_mentions_bearer_tokens_is_left_alone():
    text = "Use a Bearer token for authentication; the passage mentions keys and tokens."
    assert ALL.redact(text) == text


@pytest.mark.parametrize("text, expected", [
    ('password = "correct horse battery staple"', 'password = "[REDACTED:password]"'),
    ("DB_PASSWORD='p w'", "DB_PASSWORD='[REDACTED:password]'"),
    ('{"passwd": "hunter2"}', '{"passwd": "[REDACTED:password]"}'),
    ("pwd: hunter2 next", "pwd: [REDACTED:password] next"),
    ("passphrase: 'a b c'", "passphrase: '[REDACTED:password]'"),
    ('{"password": 123456}', '{"password": "[REDACTED:password]"}'),
])
def test_password_assignments_are_redacted_without_a_digest(text, expected):
    out = ALL.redact(text)
    assert out == expected and "sha256" not in out


def test_pem_private_key_blocks_are_redacted_whole_including_cut_off_blocks():
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq83hd==\n-----END RSA PRIVATE KEY-----"
    assert ALL.redact(f"key:\n{pem}\ndone") == f"key:\n[REDACTED:private_key:sha256={short(pem)}]\ndone"
    cut = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nNhAAAA"
    assert ALL.redact(cut).startswith("[REDACTED:private_key:sha256=") and "b3Blbn" not in ALL.redact(cut)
    public = "-----BEGIN PUBLIC KEY-----\nMFkwEwYH\n-----END PUBLIC KEY-----"
    assert ALL.redact(public) == public


def test_escaped_json_inside_a_string_is_redacted():
    text = '{\\"client_secret\\": \\"abc def\\"}'
    assert ALL.redact(text) == f'{{\\"client_secret\\": \\"[REDACTED:api_key:sha256={short("abc def")}]\\"}}'


def test_redacting_twice_changes_nothing_more():
    text = 'api_key=sk-1234567 password="x y" Authorization: Bearer abcdefgh1234'
    once = ALL.redact(text)
    assert ALL.redact(once) == once and "sk-1234567" not in once


def test_json_stays_valid_after_redaction():
    doc = json.dumps({"api_key": "k-1", "password": 42, "token": "t-1", "nested": {"secret_key": "s-1"}})
    out = json.loads(ALL.redact(doc))
    assert out["password"] == "[REDACTED:password]" and out["nested"]["secret_key"].startswith("[REDACTED:api_key")


def test_null_and_boolean_values_are_not_treated_as_secrets():
    assert ALL.redact('api_key: null, "password": false') == 'api_key: null, "password": false'


def test_only_configured_patterns_apply():
    only_pw = Redactor(True, ("password_assignment",))
    assert only_pw.redact("api_key=abc123 password=xyz") == "api_key=abc123 password=[REDACTED:password]"


def test_disabled_redactor_is_the_identity(tmp_path):
    r = Redactor.from_config(make_config(tmp_path))
    assert not r.enabled and r.redact("api_key=abc123") == "api_key=abc123"


def test_from_config_reports_unknown_names_and_source_without_failing():
    cfg = load_config({"TROVE_SENSITIVE_PATTERNS_ENABLED": "true",
                       "TROVE_SENSITIVE_PATTERNS": "api_key, Private_Key, ssn, private_key"}, hermes_home="/tmp/x")
    r = Redactor.from_config(cfg)
    d = r.describe()
    assert d["enabled"] is True and d["patterns"] == ["private_key", "api_key"]
    assert d["unknown_patterns"] == ["ssn"] and d["source"] == "env"
    assert "[REDACTED:" in d["placeholder_format"]


def test_describe_never_contains_a_secret(tmp_path):
    cfg = dataclasses.replace(make_config(tmp_path), sensitive_patterns_enabled=True)
    r = Redactor.from_config(cfg)
    r.redact("api_key=super-secret-value-1")
    assert "super-secret" not in json.dumps(r.describe()) and r.describe()["source"] == "default"


def test_describe_config_reports_the_setup_without_secrets(tmp_path):
    cfg = make_config(tmp_path, sensitive_patterns_enabled=True, sensitive_patterns=("api_key", "nope"))
    assert describe_config(cfg) == Redactor.from_config(cfg).describe()
    assert describe_config(cfg)["unknown_patterns"] == ["nope"]


def test_describe_config_folds_a_broken_setup_into_an_error(tmp_path):
    cfg = make_config(tmp_path, sensitive_patterns=None)
    assert describe_config(cfg)["error"].startswith("TypeError")


# -- the widened catalog -----------------------------------------------------------
from reliability.corpus import CLEAN, SECRETS  # noqa: E402


@pytest.mark.parametrize("text, secrets", SECRETS, ids=[t[:24] for t, _ in SECRETS])
def test_every_common_secret_form_is_redacted_by_the_default_names(text, secrets):
    out = ALL.redact(text)
    assert not [s for s in secrets if s in out], out
    assert "[REDACTED:" in out


@pytest.mark.parametrize("text", CLEAN, ids=[t[:24] for t in CLEAN])
def test_ordinary_code_and_prose_come_through_unchanged(text):
    assert ALL.redact(text) == text


def test_url_credentials_keep_the_user_and_host():
    out = ALL.redact("postgres://app:pw-Secret-9@db:5432/x")
    assert out.startswith("postgres://app:[REDACTED:url_credentials:sha256=") and out.endswith("@db:5432/x")


def test_password_values_after_semicolon_and_ampersand_are_redacted():
    assert ALL.redact("password=a1;b2&c3 next") == "password=[REDACTED:password] next"


def test_the_new_names_can_be_chosen_alone():
    only = Redactor(True, ("jwt",))
    from reliability.corpus import JWT, OPENAI
    assert JWT not in only.redact(f"t {JWT}") and OPENAI in only.redact(f"k {OPENAI}")


def test_redacting_the_corpus_twice_changes_nothing_more():
    for text, _ in SECRETS:
        once = ALL.redact(text)
        assert ALL.redact(once) == once


def test_replay_stub_previews_are_redacted(tmp_path):
    from reliability.corpus import OPENAI

    from hermes_trove.payloads.replay import stub_message
    msg = {"role": "tool", "tool_call_id": "c1", "content": f"deploy log: key {OPENAI} ok " + "x" * 5000}
    assert OPENAI in stub_message(msg, "ref.json", 400)["content"]  # the pure function keeps what it is given
    assert OPENAI not in stub_message(msg, "ref.json", 400, ALL.redact)["content"]
