"""Loaded by pytest before any test file: imports kestrel first, so that it sets OPENBLAS_CORETYPE before NumPy loads
OpenBLAS (on a CPU that OpenBLAS cannot identify, NumPy first means its generic kernels in this process and the fast
ones in every `kestrel` command a test starts, and results that differ in the last digits between the two)."""
import kestrel  # noqa: F401
