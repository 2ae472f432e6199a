"""CRM sync credentials are refused before anything else, wherever they appear, never echoed."""

from __future__ import annotations

import json

import pytest
from receipts_support import REPORTED_AT, crm_body, record

from gate.errors import GateError
from gate.receipts import build_crm_sync_record, validate_crm_sync_request
from gate.receipts.credentials import (
    CREDENTIAL_NAMES,
    is_credential_name,
    looks_like_credential,
)

CODE = "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXZhbHVl"


def forbidden(body) -> list[str]:
    with pytest.raises(GateError) as caught:
        validate_crm_sync_request(body)
    assert caught.value.code == CODE
    assert set(caught.value.details) == {"forbidden_fields"}
    return caught.value.details["forbidden_fields"]


@pytest.mark.parametrize("name", sorted(CREDENTIAL_NAMES))
def test_every_credential_name_is_refused_at_top_level(name):
    assert forbidden(crm_body(**{name: "x"})) == [name]


@pytest.mark.parametrize("name", [
    "API_KEY", "apiKey", "X-Api-Key", "accessToken", "Access-Token", "hubspot_access_token",
    "crm_api_key", "clientSecret", "oauth.client_secret", "Authorization", "db password", "refreshToken",
])
def test_credential_name_variants(name):
    assert is_credential_name(name)


@pytest.mark.parametrize("name", [
    "idempotency_key", "public_key", "token_count", "secretary", "decision_record_hash",
    "crm_object_id", "Owner", "passwords_changed_at", "keyword", "tokenizer", "key", "signature",
])
def test_ordinary_names_are_not_credentials(name):
    assert not is_credential_name(name)


def test_field_mapping_keys_and_nested_members_are_scanned():
    body = crm_body(field_mapping={"api_key": "Api_Key__c", "Owner": "owner"},
                    extra={"deep": [{"client_secret": 1}]})
    assert forbidden(body) == ["extra.deep[0].client_secret", "field_mapping.api_key"]


def test_field_mapping_values_are_field_names_and_may_name_a_credential_field():
    fields = validate_crm_sync_request(crm_body(field_mapping={"verdict": "access_token"}))
    assert fields["field_mapping"] == {"verdict": "access_token"}


@pytest.mark.parametrize("value", [
    "Bearer abcdefghijklmnop1234", "basic dXNlcjpwYXNzd29yZA==", "Token 0123456789abcdef0",
    JWT, "sk_live_51Habcdef", "xoxb-1234-5678", "ghp_abcdefghijklmnop", "pat-na1-1234-abcd",
    "AKIAABCDEFGHIJKLMNOP", "AIza" + "B" * 35, "-----BEGIN PRIVATE KEY-----\nMC4CAQ...", "ya29.a0AfH6SM",
])
def test_credential_shaped_values_are_refused_anywhere(value):
    assert looks_like_credential(value)
    assert forbidden(crm_body(field_mapping={"verdict": value})) == ["field_mapping.verdict"]
    assert forbidden(crm_body(crm_object_type=value)) == ["crm_object_type"]


@pytest.mark.parametrize("value", ["Basic Information", "Token Count", "Bearer", "decision_verdict__c",
                                   "eyJ", "Policy Version", "sk-live"])
def test_ordinary_values_are_not_credentials(value):
    assert not looks_like_credential(value)


@pytest.mark.parametrize("url, paths", [
    ("https://user:pass@crm.example/deal/1", ["crm_record_url.userinfo"]),
    ("https://user@crm.example/deal/1", ["crm_record_url.userinfo"]),
    ("https://crm.example/deal/1?access_token=abc&view=full", ["crm_record_url.query.access_token"]),
    ("https://crm.example/deal/1?hapikey=x&apiKey=y",
     ["crm_record_url.query.apiKey", "crm_record_url.query.hapikey"]),
    ("https://bucket.s3.example/o?X-Amz-Signature=ab&X-Amz-Credential=cd",
     ["crm_record_url.query.X-Amz-Credential", "crm_record_url.query.X-Amz-Signature"]),
    ("https://blob.example/c/o?sv=2024&sig=abc", ["crm_record_url.query.sig"]),
    ("https://maps.example/api?key=abc", ["crm_record_url.query.key"]),
    ("https://crm.example/cb#access_token=abc&token_type=bearer", ["crm_record_url.fragment.access_token"]),
    ("https://u:p@crm.example/x?password=1", ["crm_record_url.query.password", "crm_record_url.userinfo"]),
])
def test_crm_record_url_userinfo_and_credential_parameters_are_refused(url, paths):
    assert forbidden(crm_body(crm_record_url=url)) == paths


def test_plain_url_with_ordinary_query_is_accepted():
    url = "https://app.crm.example/contacts/1/deal/9?view=full#notes"
    assert validate_crm_sync_request(crm_body(crm_record_url=url))["crm_record_url"] == url


def test_credentials_are_refused_before_request_validation_and_never_echoed():
    secret = "super-secret-value-123"
    body = {"password": secret, "sync_status": "bogus", "unknown": 1}
    with pytest.raises(GateError) as caught:
        validate_crm_sync_request(body)
    assert caught.value.code == CODE
    assert caught.value.details == {"forbidden_fields": ["password"]}
    assert secret not in caught.value.message
    assert secret not in json.dumps(caught.value.details)


def test_builder_refuses_credentials_before_the_record_checks():
    body = crm_body(decision_record_hash="0" * 64, api_key="k")
    with pytest.raises(GateError) as caught:
        build_crm_sync_record(body=body, record=record(), sync_id="s1", idempotency_key=None,
                              reported_at=REPORTED_AT)
    assert caught.value.code == CODE


def test_stored_sync_never_contains_a_credential():
    sync = build_crm_sync_record(body=crm_body(field_mapping={"verdict": "Verdict__c"}), record=record(),
                                 sync_id="s1", idempotency_key=None, reported_at=REPORTED_AT)
    def walk(value, path=""):
        if isinstance(value, dict):
            for key, item in value.items():
                assert not is_credential_name(key), path + key
                walk(item, path + key + ".")
        elif isinstance(value, str):
            assert not looks_like_credential(value), path
    walk(sync)
