"""The LeaderWorkerSet behaviour: one subpackage per reconciler (`lws`, `pod`,
`replacement`), each with the reconciler, its pure decision modules and the
triggers that wake it (`triggers.py`).

The three subpackages never import one another (an import-linter contract): what
two of them share sits at this package's top level (events, revisions, the leader
pod template, the held-replacements board, the group metrics) or in `group/`.
Nothing here imports `webhooks`, `wiring` or anything above them.
"""
