"""The manager's `config.lws.x-k8s.io/v1alpha1` Configuration: types, file form, defaults,
validation. Pure: the command that reads it and starts a manager lives above the runtime.
"""
