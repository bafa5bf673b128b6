"""Loaded by pytest before any test file.

- Imports kestrel first, so that it sets OPENBLAS_CORETYPE before NumPy loads OpenBLAS (on a CPU that OpenBLAS cannot
  identify, NumPy first means its generic kernels in this process and the fast ones in every `kestrel` command a test
  starts, and results that differ in the last digits between the two).
- Groups the tests for pytest-xdist's `--dist loadgroup` (scripts/test-python-package.sh): a test runs in the worker
  of its file, so that a file's module fixtures are made once, unless it names its own group with
  `@pytest.mark.xdist_group(...)` (test_torch.py: the tests of each trained model, whose training is a minute or more,
  form a group of their own, so that the two models train on the two cores at once).
"""
import pytest

import kestrel  # noqa: F401


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): the tests of one group run in one pytest-xdist worker")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.path.name))
