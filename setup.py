"""Build the Cython extensions (the engine and the oracle kernels) with OpenMP and -O3.

The target CPU: ``YAMBLAB_MARCH`` (default ``native``: the fastest code for the machine that
builds, fine for a local build). Binaries that move between machines (a cluster image, a wheel)
need a target every node has: ``YAMBLAB_MARCH=x86-64-v2`` (what infra/Dockerfile sets: SSE4.2
and POPCNT, Intel CPUs since 2008, AMD since 2011), ``x86-64-v3`` (AVX2) where every node has
it, or an empty value for the compiler's default. Code built with ``native`` on one CPU can die
with "illegal instruction" on another. ``YAMBLAB_PORTABLE=1`` is the same as an empty
``YAMBLAB_MARCH``.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup


def _compiler_accepts(flag: str) -> bool:
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "t.c")
        with open(src, "w") as f:
            f.write("int main(void){return 0;}\n")
        try:
            return subprocess.run([cc, flag, src, "-o", os.path.join(d, "t")],
                                  capture_output=True).returncode == 0
        except OSError:
            return False


compile_args = ["-O3"]
link_args = []
if sys.platform != "win32":
    if _compiler_accepts("-fopenmp"):
        compile_args.append("-fopenmp")
        link_args.append("-fopenmp")
    march = "" if os.environ.get("YAMBLAB_PORTABLE") else os.environ.get("YAMBLAB_MARCH", "native").strip()
    if march:
        if _compiler_accepts(f"-march={march}"):
            compile_args.append(f"-march={march}")
        else:
            print(f"setup.py: the compiler refuses -march={march}; building for its default target",
                  file=sys.stderr)

common = dict(include_dirs=[np.get_include()], extra_compile_args=compile_args,
              extra_link_args=link_args,
              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
extensions = [
    Extension("yamblab.games.yahtzee._engine", ["yamblab/games/yahtzee/_engine.pyx"], **common),
    Extension("yamblab.oracle.yahtzee._kernels", ["yamblab/oracle/yahtzee/_kernels.pyx"], **common),
    Extension("yamblab.games.yamb._engine", ["yamblab/games/yamb/_engine.pyx"], **common),
    Extension("yamblab.games._dice_kernels", ["yamblab/games/_dice_kernels.pyx"], **common),
    Extension("yamblab.oracle.yamb._free", ["yamblab/oracle/yamb/_free.pyx"], **common),
    Extension("yamblab.oracle.yahtzee._target", ["yamblab/oracle/yahtzee/_target.pyx"], **common),
    Extension("yamblab.oracle.yahtzee._occupancy", ["yamblab/oracle/yahtzee/_occupancy.pyx"], **common),
    Extension("yamblab.oracle.yamb._turn", ["yamblab/oracle/yamb/_turn.pyx"], **common),
]

setup(ext_modules=cythonize(extensions, include_path=["yamblab/games"],
                            compiler_directives={"language_level": "3"}, quiet=True))
