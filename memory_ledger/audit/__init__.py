"""Evidence an auditor checks alone: the lifecycle ledger as an RFC 9162 Merkle tree
(`merkle`), tree heads signed with an Ed25519 key derived from the master key (`heads`),
a request's evidence pack (`pack`), and the standalone verifier (`verifier`: the
standard library and `cryptography` only). See docs/compliance.md."""
