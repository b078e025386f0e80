"""The DisaggregatedSet and DisaggregatedSetRoleScaler API: model, CRDs, defaulting
and validation."""
