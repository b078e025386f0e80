"""Go's encodings and parsers, reproduced where a user or upstream's controller would
see a difference: integers as `strconv` reads them, durations as `time.ParseDuration`,
int-or-string values, resource quantities (their value and the canonical text Go
writes back), and the compact JSON `encoding/json` writes for a Kubernetes type (which
upstream's revision hashes cover). Pure, and imports nothing else of leaderworkerset.
"""
