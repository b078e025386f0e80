"""The LeaderWorkerSet API as data: the typed model and its JSON codec, constants,
defaults, validation, the CRD, and the reading of plain JSON objects (metadata, the
revision key, API times). Pure: no I/O, no asyncio.

The bottom layer: it imports nothing else of leaderworkerset (not runtime, group,
controllers, webhooks or anything above), so every other package can build on it.
"""
