"""The LeaderWorkerSet behaviour: one subpackage per reconciler (`lws`, `pod`,
`replacement`), each with the reconciler, its pure decision modules and the
triggers that wake it (`triggers.py`).

The three subpackages never import one another (an import-linter contract): what
two of them share sits at this package's top level (events, revisions, the leader
pod template, the held-replacements board, the headless Services, the group
metrics) or in `group/`. It builds on caches, group, runtime and api; it never
imports webhooks (what both need lives in group), wiring, admission_dryrun or
anything else above it.
"""
