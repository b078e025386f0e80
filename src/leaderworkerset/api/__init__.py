"""Both APIs as data, pure (no I/O, no asyncio): `leaderworkerset` (the
LeaderWorkerSet model, constants, defaults, validation, CRD), `disaggregatedset` (the
DisaggregatedSet and RoleScaler models, defaults, validation, CRDs, the names and
revision hash of what a set owns), `config` (the manager Configuration) and `go` (Go's
encodings and parsers, which upstream's hashes and a user's values depend on); beside
them every resource kind the code reads or writes (`resources`), the reading of plain
JSON objects (`objects`: metadata, the revision key, API times), field errors, and the
check of an object against its CRD's schema (`schema_check`).

The bottom layer: it imports nothing else of leaderworkerset (not runtime, group,
controllers, webhooks or anything above), so every other package can build on it.
Inside, import-linter keeps `go` below `leaderworkerset`, below `disaggregatedset` and
`config`, below `resources` and `schema_check`.
"""
