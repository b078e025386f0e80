"""Hash mode's PostTermination group replacement: the reconciler that removes the
scheduling gates of the leaders the rule admits, and the triggers that wake it.

The rule itself (which gated leaders to release, T tearing down, G gated) is
`group.post_termination`, pure and shared with `kubectl lws`, which shows the same
pairing. This package imports no other controller's package (an import-linter
contract): what they share lives in controllers/ or group/.
"""
