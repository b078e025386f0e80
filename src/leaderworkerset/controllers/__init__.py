"""The reconcilers: one subpackage per controller (`lws`, `pod`, `replacement`,
`disaggregatedset`), each with its reconciler, its decisions (pure modules beside it,
which import no runtime, caches or webhooks: an import-linter contract) and the
triggers that wake it (`triggers.py`).

The four subpackages never import one another (an import-linter contract): what
two of them share sits at this package's top level (events, revisions, the leader
pod template, the held-replacements board, the headless Services, the group
metrics) or in `group/`. It builds on caches, group, runtime and api; it never
imports webhooks (what both need lives in group), wiring, admission_dryrun or
anything else above it.
"""
