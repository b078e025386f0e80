"""The LeaderWorkerSet behaviour: one subpackage per reconciler (`lws`, `pod`,
`replacement`), and beside them what more than one of them uses: events, the
ControllerRevisions, the leader pod template, the headless Services, the group
lifecycle metrics.

It builds on group, runtime and api; it never imports webhooks (what both need lives
in group) nor wiring, admission_dryrun or anything else above it.
"""
