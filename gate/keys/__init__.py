"""Key material: Ed25519 and HMAC signing and the keyring (`signing`), the keys a verifier trusts
(`anchors`), a detached signature checked against them (`detached`), which key signs what
(`config`), and API key generation and hashing (`apikeys`)."""
