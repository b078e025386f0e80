"""The release version: the one place it is written. pyproject.toml reads it
(`[tool.setuptools.dynamic]`), and `make release` stamps it into the chart, the image
tag and the manifests; tests/unit/manifests/test_image_version.py checks that the
committed chart and kustomization agree with it."""

__version__ = "0.1.0"
