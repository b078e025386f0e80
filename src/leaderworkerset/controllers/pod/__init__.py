"""The pod reconciler: for each leader pod its group (the worker StatefulSet, the
per-group Service, the gang-scheduling PodGroup, Hash mode's group-ready gate) and,
for every group pod, the group restart policy.

It does not import the other reconcilers' packages (controllers.lws,
controllers.replacement): what they share lives in controllers/ or group/.
"""
