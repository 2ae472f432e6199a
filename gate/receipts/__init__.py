"""Execution receipts, Outcome Records and CRM sync records: validation, building, hashing
and link verification. Pure code: no I/O; ids, clock values and the stored Decision Record
are passed in.

Public API (everything else in the package is an implementation detail):

* value sets: `EXECUTION_STATUSES`, `OUTCOME_STATUSES`, `SYNC_STATUSES`, `SYNC_DIRECTIONS`
  and their terminal / effectiveness classifications (`gate.receipts.values`);
* request validation: `validate_execution_request`, `validate_outcome_request`,
  `validate_crm_sync_request`, `request_input_hash`;
* binding: `action_binding_match`, `derived_action_binding`, `check_record_references`;
* builders: `build_execution_receipt`, `build_outcome_record`, `build_crm_sync_record`, and
  `check_execution_link` (an outcome's link to the execution it follows);
* hashes: `execution_hash_of`, `outcome_hash_of`, `sync_hash_of` and the preimage member
  lists;
* packet step 3: `verify_receipt_links` → list of `LinkFailure`.

The contract (value meanings, limits, preimages, error codes) is written out in
docs/receipts.md.
"""

from gate.receipts.binding import (
    ANCHOR_MEMBERS,
    action_binding_match,
    check_record_references,
    derived_action_binding,
)
from gate.receipts.build import (
    CRM_SYNC_RECORD_MISMATCH,
    EXECUTION_RECORD_MISMATCH,
    OUTCOME_EXECUTION_MISMATCH,
    OUTCOME_RECORD_MISMATCH,
    ExecutionLookup,
    build_crm_sync_record,
    build_execution_receipt,
    build_outcome_record,
    check_execution_link,
)
from gate.receipts.credentials import CREDENTIAL_NAMES, credential_paths
from gate.receipts.hashing import (
    EXECUTION_HASH_MEMBERS,
    OUTCOME_HASH_MEMBERS,
    OUTCOME_LINK_MEMBERS,
    RECORD_LINKS,
    SYNC_HASH_MEMBERS,
    compact,
    execution_hash_of,
    hash_preimage,
    outcome_hash_of,
    sync_hash_of,
)
from gate.receipts.links import LinkFailure, verify_receipt_links
from gate.receipts.validation import (
    CREDENTIALS_FORBIDDEN,
    CRM_SYNC_BODY,
    EXECUTION_BODY,
    OUTCOME_BODY,
    request_input_hash,
    validate_crm_sync_request,
    validate_execution_request,
    validate_outcome_request,
)
from gate.receipts.values import (
    EXECUTION_MUTATED_STATUSES,
    EXECUTION_STATUSES,
    EXECUTION_TERMINAL_STATUSES,
    OUTCOME_EFFECTIVENESS_CLASS,
    OUTCOME_STATUSES,
    OUTCOME_TERMINAL_STATUSES,
    SYNC_DIRECTION_DEFAULT,
    SYNC_DIRECTIONS,
    SYNC_STATUSES,
    SYNC_TERMINAL_STATUSES,
)

# Error codes this package raises (besides REQUEST_INVALID and DECISION_NOT_FOUND).
ERROR_CODES = (
    EXECUTION_RECORD_MISMATCH,
    OUTCOME_RECORD_MISMATCH,
    CRM_SYNC_RECORD_MISMATCH,
    OUTCOME_EXECUTION_MISMATCH,
    CREDENTIALS_FORBIDDEN,
)

__all__ = [
    "ANCHOR_MEMBERS",
    "CREDENTIALS_FORBIDDEN",
    "CREDENTIAL_NAMES",
    "CRM_SYNC_BODY",
    "CRM_SYNC_RECORD_MISMATCH",
    "ERROR_CODES",
    "EXECUTION_BODY",
    "EXECUTION_HASH_MEMBERS",
    "EXECUTION_MUTATED_STATUSES",
    "EXECUTION_RECORD_MISMATCH",
    "EXECUTION_STATUSES",
    "EXECUTION_TERMINAL_STATUSES",
    "OUTCOME_BODY",
    "OUTCOME_EFFECTIVENESS_CLASS",
    "OUTCOME_EXECUTION_MISMATCH",
    "OUTCOME_HASH_MEMBERS",
    "OUTCOME_LINK_MEMBERS",
    "OUTCOME_RECORD_MISMATCH",
    "OUTCOME_STATUSES",
    "OUTCOME_TERMINAL_STATUSES",
    "RECORD_LINKS",
    "SYNC_DIRECTIONS",
    "SYNC_DIRECTION_DEFAULT",
    "SYNC_HASH_MEMBERS",
    "SYNC_STATUSES",
    "SYNC_TERMINAL_STATUSES",
    "ExecutionLookup",
    "LinkFailure",
    "action_binding_match",
    "build_crm_sync_record",
    "build_execution_receipt",
    "build_outcome_record",
    "check_execution_link",
    "check_record_references",
    "compact",
    "credential_paths",
    "derived_action_binding",
    "execution_hash_of",
    "hash_preimage",
    "outcome_hash_of",
    "request_input_hash",
    "sync_hash_of",
    "validate_crm_sync_request",
    "validate_execution_request",
    "validate_outcome_request",
    "verify_receipt_links",
]
