"""Builds the compiled module kestrel._kestrel with CMake for `pip install .` (see pyproject.toml).

The Release build directory is build/ (the one scripts/build.sh makes), or $KESTREL_BUILD_DIR: it is configured when
it does not exist yet and otherwise reused, so that installing after `bash scripts/build.sh` only relinks. The module
must be built for the Python that installs it (same extension suffix); a build/ made for another Python is refused.
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
(ROOT / "build-pip").mkdir(exist_ok=True)


def version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(\s*kestrel\s+VERSION\s+([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = Path(os.environ.get("KESTREL_BUILD_DIR", ROOT / "build")).resolve()
        if not (build / "CMakeCache.txt").exists():
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                            f"-DPython_EXECUTABLE={sys.executable}"], check=True)
        jobs = str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", str(build), "--target", "kestrel_python", "-j", jobs], check=True)
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        name = ext.name.split(".")[-1]  # _kestrel, or _blas_core (built with it)
        built = build / "python" / "kestrel" / (name + suffix)
        if not built.exists():
            found = sorted(p.name for p in (build / "python" / "kestrel").glob(name + "*"))
            sys.exit(f"{build} holds {found or 'no module'}, not {name}{suffix} for {sys.executable}: "
                     "configure another build directory for this Python with KESTREL_BUILD_DIR=DIR")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, dest)


setup(
    version=version(),
    ext_modules=[Extension("kestrel._blas_core", sources=[]), Extension("kestrel._kestrel", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own scratch space, kept out of CMake's build/.
    options={"build": {"build_base": "build-pip"}, "egg_info": {"egg_base": "build-pip"}},
)
