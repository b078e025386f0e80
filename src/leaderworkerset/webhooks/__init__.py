"""Admission of LeaderWorkerSets (defaulting, validation), DisaggregatedSets
(validation, as upstream's webhook) and pods (the mutation that labels a group's pods
and injects their environment), as handlers for the runtime's webhook server; the pod
mutation itself is a pure function.

It builds on group, runtime and api; it never imports controllers (what both need
lives in group) nor wiring, admission_dryrun or anything else above it.
"""
