"""Hash mode's PostTermination group replacement: the rule that decides which gated
leaders to release, and the reconciler that removes their scheduling gates.

It imports no other controller's package (an import-linter contract): what they
share lives in controllers/ or group/. Its decisions beside the reconciler
(`post_termination`) are pure: no runtime, caches or webhooks.
"""
