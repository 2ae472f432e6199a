"""The audit chain and its proofs: chain links (`links`), RFC 6962 Merkle trees and signed
checkpoints (`merkle`), the witnessed checkpoint log (`checkpoint_log`) and ledger row seals
(`rowseal`). Pure: no database, no web framework."""
