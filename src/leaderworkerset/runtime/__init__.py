"""Controller machinery in the manner of client-go and controller-runtime: the API
client and its paged LIST, watch caches, work queues, controllers, the manager,
leader election, events, metrics, the webhook server and its certificates.

It knows nothing of LeaderWorkerSets: it imports only `leaderworkerset.api` (for the
JSON helpers), never group, controllers, webhooks or anything above them.
"""
