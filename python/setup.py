"""pip install --no-build-isolation ./python: builds the engine and the extension module with
CMake (the same build as scripts/build.sh, for the Python running pip) and installs the kvslim
package. Needs the Debian packages of docs/python.md; reads no package index."""

import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class BuildWithCMake(build_py):
    def run(self):
        build = os.path.join(ROOT, "build", "pip")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                               "-DKVSLIM_PYTHON=ON", "-DKVSLIM_BUILD_TESTS=OFF", "-DKVSLIM_BUILD_BENCHMARKS=OFF",
                               f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build, "--target", "kvslim_python"])
        target = os.path.join(self.build_lib, "kvslim")
        shutil.copytree(os.path.join(build, "python", "kvslim"), target, dirs_exist_ok=True)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # the wheel holds a compiled module: tag it for this platform
        return True


setup(
    name="kvslim",
    version="0.3.0",
    description="Long-context LLM inference on the CPU with a KV cache that really shrinks",
    packages=["kvslim"],
    python_requires=">=3.9",
    install_requires=["numpy"],
    cmdclass={"build_py": BuildWithCMake},
    distclass=BinaryDistribution,
)
