"""The CUDA sources of both schemes (``ozsim/gemm/ozaki{1,2}/kernels/*.cu`` and ``*.cuh``) and of
the one-pass gates (``ozsim/gemm/kernels``) as
NVRTC receives them: :func:`ozsim.gemm._cu_source.load_source` inlines every local header (NVRTC
sees no files), each referenced file exists, the package data ships them, and, where ``nvcc``
is on PATH, each source compiles for sm_90a. Needs no CuPy and no GPU."""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import ozsim
from ozsim.gemm._cu_source import load_source, local_includes
from ozsim.gemm.ozaki1.scheme import _MAX_EXP_DIFF
from ozsim.gemm.ozaki2.moduli import LIMB_BITS, NORM_FRAC_BITS

GEMM = Path(ozsim.__file__).parent / "gemm"
KERNEL_DIRS = (GEMM / "ozaki1" / "kernels", GEMM / "ozaki2" / "kernels", GEMM / "kernels")
SOURCES = sorted(p for d in KERNEL_DIRS for p in d.glob("*.cu"))
HEADERS = sorted(p for d in KERNEL_DIRS for p in d.glob("*.cuh"))
#: The Python modules that compile these sources.
LOADERS = (GEMM / "ozaki1" / "cuda.py", GEMM / "ozaki2" / "cuda.py", GEMM / "ozaki2" / "wgmma.py",
           GEMM / "native_gate.py", GEMM / "ozaki1" / "onepass.py", GEMM / "ozaki2" / "onepass.py",
           GEMM.parent / "observables.py")

_CRT = [f"-DNFRAC={NORM_FRAC_BITS}", f"-DLBITS={LIMB_BITS}"]
_RES32 = [f"-DRES32_{name}{m}=1.0f" for m in (0, 1) for name in ("P", "IP")] + [
    f"-DRES32_W{m}_{i}=1.0f" for m in (0, 1) for i in range(5)]
#: ozsim.gemm.ozaki2.wgmma's tile options (its _kernel_options adds the kernel's name and
#: template arguments)
_PRODUCTS = ["-std=c++17", "-DBM=128", "-DBN=256", "-DBK=128", "-DSTAGES=4"]
#: ``-D`` options (one variant each) for compiling a source on its own; the GPU path passes its
#: own per variant.
OPTIONS = {
    "ozaki1/kernels/analyse.cu": [f"-DMAXD={_MAX_EXP_DIFF}"],
    "ozaki1/kernels/split.cu": ["-DCH=16"],
    "ozaki1/kernels/products_dp4a.cu": ["-DMP2=32"],
    "ozaki2/kernels/analyse.cu": _CRT,
    "ozaki2/kernels/residues.cu": [*_CRT, "-DNH=6"],
    "ozaki2/kernels/residues32.cu": [*_CRT, "-DNP=5", "-DPB32=14", "-DNMODR=2", *_RES32],
    "ozaki2/kernels/finish.cu": [*_CRT, "-DNMODC=16", "-DNLIMBC=4", "-DFINISH_PARTS=1",
                                 "-DFINISH_PRELOAD=1", "-DFINISH_BLOCKS=2"],
    "ozaki2/kernels/finish_tc.cu": [*_CRT, "-DNMODC=15", "-DNLIMBC=3", "-DTC_UNITS=8",
                                    "-DTC_UNIT_LIMB=0x22111000", "-DTC_UNIT_SHIFT=0x10210210"],
    "ozaki1/kernels/products_wgmma.cu": ["-std=c++17", "-DBM=128", "-DBN=128", "-DBK=128",
                                         "-DSTAGES=4"],
    "ozaki2/kernels/products_wgmma.cu": [*_PRODUCTS, "-DKERNEL_NAME=crt_gemm_mod3_c2",
                                         "-DGEMM_FORM=3", "-DGEMM_CL=2", "-DGEMM_SHORT=0",
                                         "-DGEMM_PERM=0"],
    "gemm/kernels/dense_gate.cu": ["-std=c++17", "-DGATE_QUBITS=4"],
    "gemm/kernels/dense_gate_mma.cu": ["-std=c++17", "-DGATE_QUBITS=5", "-DSTAGES=2", "-DA_SMEM=1"],
    "gemm/kernels/int8_gate.cu": ["-std=c++17", "-DGATE_QUBITS=2", "-DSPLITS=8"],
    "gemm/kernels/int8_gate_mma.cu": ["-std=c++17", "-DGATE_QUBITS=4", "-DSPLITS=8"],
    "gemm/kernels/crt_gate.cu": ["-std=c++17", *_CRT, "-DGATE_QUBITS=2", "-DNMOD=14",
                                 "-DNLIMB=3"],
    "gemm/kernels/crt_gate_mma.cu": ["-std=c++17", *_CRT, "-DGATE_QUBITS=4", "-DNMOD=16",
                                     "-DNLIMB=4"],
    "gemm/kernels/crt_gate_exact.cu": ["-std=c++17", *_CRT, "-DGATE_QUBITS=3", "-DNMOD=15",
                                       "-DNLIMB=3"],
    "gemm/kernels/crt_gate_slices.cu": ["-std=c++17", *_CRT, "-DGATE_QUBITS=4", "-DNMOD=15",
                                        "-DNLIMB=3"],
    "gemm/kernels/pauli_expectation.cu": ["-std=c++17"],
    "gemm/kernels/crt_residues_tc.cu": ["-std=c++17", *_CRT, "-DGATE_QUBITS=7", "-DNMOD=15",
                                        "-DNLIMB=3"],
}
#: Further variants compiled as well (compile-time branches the first variant does not take).
MORE_OPTIONS = {
    "ozaki2/kernels/products_wgmma.cu": [[*_PRODUCTS, "-DKERNEL_NAME=crt_gemm_mod4_short_c4_p",
                                          "-DGEMM_FORM=4", "-DGEMM_CL=4", "-DGEMM_SHORT=1",
                                          "-DGEMM_PERM=1"],
                                         [*_PRODUCTS, "-DKERNEL_NAME=crt_gemm_mod4", "-DNO_EPI=1",
                                          "-DNO_MMA=1", "-DGEMM_FORM=4", "-DGEMM_CL=1",
                                          "-DGEMM_SHORT=0", "-DGEMM_PERM=0"]],
    "ozaki1/kernels/analyse.cu": [[f"-DMAXD={_MAX_EXP_DIFF}", "-DTAB=1"],
                                  [f"-DMAXD={_MAX_EXP_DIFF}", "-DVPT=16"]],
    "ozaki1/kernels/split.cu": [["-DCH=4", "-DTAB=1"], ["-DCH=8"]],
    "gemm/kernels/dense_gate.cu": [["-std=c++17", "-DGATE_QUBITS=5", "-DSINGLE=1"],
                                   ["-std=c++17", "-DGATE_QUBITS=4", "-DSINGLE=1"],
                                   ["-std=c++17", "-DGATE_QUBITS=3"],
                                   ["-std=c++17", "-DGATE_QUBITS=4", "-DSINGLE=1", "-DWORDS=1",
                                    "-DPRODUCTS=4"],
                                   ["-std=c++17", "-DGATE_QUBITS=3", "-DSINGLE=1", "-DWORDS=2"],
                                   ["-std=c++17", "-DGATE_QUBITS=4", "-DSINGLE=1", "-DWORDS=2"]],
    "gemm/kernels/crt_gate_exact.cu": [["-std=c++17", *_CRT, "-DGATE_QUBITS=1", "-DNMOD=2",
                                        "-DNLIMB=1", "-DROUND=0", "-DEXACT_TEST"],
                                       ["-std=c++17", *_CRT, "-DGATE_QUBITS=2", "-DNMOD=8",
                                        "-DNLIMB=2", "-DTBITS=28", "-DKARATSUBA=0",
                                        "-DTHREADS=256", "-DMIN_BLOCKS=2"]],
    "gemm/kernels/crt_gate_slices.cu": [["-std=c++17", *_CRT, "-DGATE_QUBITS=3", "-DNMOD=2",
                                         "-DNLIMB=1", "-DROUND=0", "-DK16=0", "-DPREFETCH=0"],
                                        ["-std=c++17", *_CRT, "-DGATE_QUBITS=3", "-DNMOD=8",
                                         "-DNLIMB=2", "-DTHREADS=256", "-DMIN_BLOCKS=2"],
                                        ["-std=c++17", *_CRT, "-DGATE_QUBITS=6", "-DNMOD=15",
                                         "-DNLIMB=3", "-DTHREADS=512", "-DPREFETCH=1"],
                                        ["-std=c++17", *_CRT, "-DGATE_QUBITS=5", "-DNMOD=12",
                                         "-DNLIMB=3", "-DNO_PAIRS=1"]],
    "gemm/kernels/crt_gate_mma.cu": [["-std=c++17", *_CRT, "-DGATE_QUBITS=3", "-DNMOD=15",
                                      "-DNLIMB=3", "-DDIGITS=1"],
                                     ["-std=c++17", *_CRT, "-DGATE_QUBITS=5", "-DNMOD=15",
                                      "-DNLIMB=3", "-DMPT=4", "-DINT_PIECES=1", "-DPLANE_PAD=4"],
                                     ["-std=c++17", *_CRT, "-DGATE_QUBITS=5", "-DNMOD=15",
                                      "-DNLIMB=3", "-DMPT=4", "-DINT_PIECES=1", "-DPLANE_PAD=4",
                                      "-DA_PAIRED=1", "-DA_SMEM_PLANES=15", "-DTHREADS=512",
                                      "-DSPLIT_FLOOR=0"],
                                     ["-std=c++17", *_CRT, "-DGATE_QUBITS=6", "-DNMOD=15",
                                      "-DNLIMB=3", "-DMPT=4", "-DINT_PIECES=1", "-DA_PAIRED=1",
                                      "-DWGM=8", "-DA_SMEM_PLANES=12", "-DMEMBER_MAP=1",
                                      "-DTHREADS=512"],
                                     ["-std=c++17", *_CRT, "-DGATE_QUBITS=4", "-DNMOD=15",
                                      "-DNLIMB=3", "-DINT_PIECES=1", "-DTC_SPLIT=0",
                                      "-DC1S_TABLE=1", "-DSIGNED_MAGIC=0"]],
    "gemm/kernels/crt_residues_tc.cu": [["-std=c++17", *_CRT, "-DGATE_QUBITS=9", "-DNMOD=16",
                                         "-DNLIMB=4", "-DROUND=0", "-DTAB=1", "-DROWFAST=1"],
                                        ["-std=c++17", *_CRT, "-DGATE_QUBITS=5", "-DNMOD=2",
                                         "-DNLIMB=1", "-DROWFAST=1"],
                                        ["-std=c++17", *_CRT, "-DGATE_QUBITS=8", "-DNMOD=15",
                                         "-DNLIMB=3", "-DTAB=1", "-DASYNC=1"],
                                        ["-std=c++17", *_CRT, "-DGATE_QUBITS=7", "-DNMOD=15",
                                         "-DNLIMB=3", "-DROWFAST=1", "-DASYNC=1"]],
    "ozaki2/kernels/finish_tc.cu": [[*_CRT, "-DNMODC=16", "-DNLIMBC=4", "-DTC_UNITS=9",
                                     "-DTC_UNIT_LIMB=0x222111000", "-DTC_UNIT_SHIFT=0x210210210"],
                                    [*_CRT, "-DNMODC=2", "-DNLIMBC=1", "-DTC_UNITS=1",
                                     "-DTC_UNIT_LIMB=0x0", "-DTC_UNIT_SHIFT=0x0", "-DTC_GROUPS=1"]],
    "ozaki2/kernels/finish.cu": [[*_CRT, "-DNMODC=15", "-DNLIMBC=3", "-DFINISH_PARTS=2",
                                  "-DFINISH_BLOCKS=4", "-DFINISH_COLS=2", "-DFINISH_CONST=1"],
                                 [*_CRT, "-DNMODC=8", "-DNLIMBC=2", "-DFINISH_PARTS=2",
                                  "-DFINISH_CONST=1"],
                                 [*_CRT, "-DNMODC=11", "-DNLIMBC=3", "-DFINISH_PARTS=1",
                                  "-DFINISH_COLS=1", "-DFINISH_BLOCKS=6"]],
    "gemm/kernels/int8_gate_mma.cu": [["-std=c++17", "-DGATE_QUBITS=5", "-DSPLITS=9", "-DWGMMA=1",
                                       "-DTHREADS=128"],
                                      ["-std=c++17", "-DGATE_QUBITS=6", "-DSPLITS=8", "-DWGMMA=1",
                                       "-DTHREADS=256"]],
    "gemm/kernels/dense_gate_mma.cu": [["-std=c++17", "-DGATE_QUBITS=5", "-DASYNC=0",
                                        "-DA_SMEM=2"],
                                       ["-std=c++17", "-DGATE_QUBITS=6", "-DASYNC=0",
                                        "-DA_SMEM=1", "-DMMA_K8=1", "-DGAUSS=1", "-DWGM=2"],
                                       ["-std=c++17", "-DGATE_QUBITS=5", "-DASYNC=0",
                                        "-DA_SMEM=2", "-DMMA_K8=1", "-DGAUSS=1"],
                                       ["-std=c++17", "-DGATE_QUBITS=7", "-DSTAGES=2",
                                        "-DMMA_K8=1", "-DGAUSS=1"]],
}


def _key(path: Path) -> str:
    return "/".join(path.parts[-3:])


def _closure(path: Path) -> set[Path]:
    """The headers ``path`` includes, directly or through other headers (each resolved next to
    the file that includes it)."""
    seen: set[Path] = set()
    todo = [path]
    while todo:
        current = todo.pop()
        for name in local_includes(current.read_text()):
            target = (current.parent / name).resolve()
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_kernel_directories_hold_sources_and_headers():
    assert {_key(p) for p in SOURCES} >= set(OPTIONS)
    assert HEADERS


def test_every_file_the_gpu_modules_name_exists():
    names = set()
    for mod in LOADERS:
        names |= set(re.findall(r'"([A-Za-z0-9_]+\.cu)"', mod.read_text()))
    assert names, "no kernel file named in the GPU modules"
    have = {p.name for p in SOURCES}
    assert names <= have, f"named but missing: {sorted(names - have)}"


@pytest.mark.parametrize("path", SOURCES, ids=_key)
def test_load_source_inlines_every_local_header(path):
    text = load_source(path)
    assert not local_includes(text), "a local #include is left for NVRTC, which has no files"
    for header in _closure(path):
        assert header.is_file()
        body = [ln for ln in header.read_text().splitlines()
                if ln.strip() and not local_includes(ln)]
        assert all(ln in text for ln in body), f"{header.name} not inlined"


@pytest.mark.parametrize("path", SOURCES, ids=_key)
def test_line_directives_point_at_the_original_lines(path):
    """Every line of the inlined text, read through the ``#line`` directives before it, is that
    line of the file it came from (compiler messages name the right place)."""
    files = {_key(p): p.read_text().splitlines() for p in (*SOURCES, *HEADERS)}
    label, line = None, 0
    for text in load_source(path).splitlines():
        m = re.fullmatch(r'#line (\d+) "([^"]+)"', text)
        if m:
            label, line = m.group(2), int(m.group(1))
            continue
        assert files[label][line - 1] == text, (label, line)
        line += 1


def test_every_header_is_included():
    used = set().union(*(_closure(p) for p in SOURCES))
    assert set(HEADERS) <= used, f"unused headers: {sorted(h.name for h in set(HEADERS) - used)}"


def test_load_source_reports_missing_headers_and_cycles(tmp_path):
    (tmp_path / "a.cu").write_text('#include "missing.cuh"\n')
    with pytest.raises(FileNotFoundError, match="missing.cuh"):
        load_source(tmp_path / "a.cu")
    (tmp_path / "b.cu").write_text('#include "x.cuh"\n')
    (tmp_path / "x.cuh").write_text('#include "y.cuh"\n')
    (tmp_path / "y.cuh").write_text('  #  include "x.cuh"  // back\n')
    with pytest.raises(ValueError, match="cycle"):
        load_source(tmp_path / "b.cu")
    (tmp_path / "c.cu").write_text('int a;\n#include <cstdint>\n#include "z.cuh"\nint c;\n')
    (tmp_path / "z.cuh").write_text("int z;")
    text = load_source(tmp_path / "c.cu")
    assert "#include <cstdint>" in text and "int z;\n" in text and "#include \"" not in text
    assert text.index("int a;") < text.index("int z;") < text.index("int c;")


def test_package_data_ships_the_sources():
    tomllib = pytest.importorskip("tomllib")
    root = GEMM.parent.parent
    if not (root / "pyproject.toml").is_file():
        pytest.skip("not a source checkout")
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = data.get("package-data", {})
    for path in (*SOURCES, *HEADERS):
        package = ".".join(path.parent.parent.relative_to(root).parts)
        rel = path.relative_to(path.parent.parent)
        assert any(rel.match(g) for g in globs.get(package, [])), f"{rel} not in {package}'s data"


_NVCC = shutil.which("nvcc")


@pytest.fixture(scope="module")
def nvcc_results(tmp_path_factory):
    """``{source: (returncode, messages)}`` of ``nvcc -arch=sm_90a -cubin`` on each inlined
    source (compiled side by side: a few seconds each)."""
    work = tmp_path_factory.mktemp("nvcc")

    def build(path: Path):
        src = work / (_key(path).replace("/", "_"))
        src.write_text(load_source(path))
        for options in [OPTIONS.get(_key(path), []), *MORE_OPTIONS.get(_key(path), [])]:
            res = subprocess.run([_NVCC, "-arch=sm_90a", "-cubin", "-o", "/dev/null", *options,
                                  str(src)], check=False, capture_output=True, text=True)
            if res.returncode:
                break
        return _key(path), (res.returncode, res.stderr[-4000:])

    with ThreadPoolExecutor(4) as ex:
        return dict(ex.map(build, SOURCES))


@pytest.mark.skipif(_NVCC is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("path", SOURCES, ids=_key)
def test_each_source_compiles_with_nvcc(path, nvcc_results):
    rc, messages = nvcc_results[_key(path)]
    assert rc == 0, messages
