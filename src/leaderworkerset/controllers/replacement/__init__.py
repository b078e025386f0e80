"""Hash mode's PostTermination group replacement: the rule that decides which gated
leaders to release, and the reconciler that removes their scheduling gates.

It does not import the other reconcilers' packages (controllers.lws,
controllers.pod): what they share lives in controllers/ or group/.
"""
