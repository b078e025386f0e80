"""The LeaderWorkerSet reconciler: revisions, the leader workload (Ordinal: a
StatefulSet with its rolling update; Hash: a Deployment), the shared Service and the
status.

It does not import the other reconcilers' packages (controllers.pod,
controllers.replacement): what they share lives in controllers/ or group/.
"""
