"""Key material: Ed25519 and HMAC signing and the keyring (`signing`), which key signs what
(`config`), and API key generation and hashing (`apikeys`)."""
