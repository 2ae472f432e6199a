"""The audit chain and its proofs: chain links (`links`), RFC 6962 Merkle trees and signed
checkpoints (`merkle`), the witnessed checkpoint log (`checkpoint_log`) and ledger row seals
(`rowseal`); and the seal of the signed chains' events, release, governance, key grant and hold
events alike (`sealing`: their hash, signature and link checks), and what an offline check of one
of those chains finds (`event_check`: one verdict, its problems). Pure: no database, no web
framework."""
