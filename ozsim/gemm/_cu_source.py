"""CUDA source files as the text NVRTC compiles (private; no CuPy, so CPU tests can check them).

The kernels of :mod:`ozsim.gemm.ozaki1` and :mod:`ozsim.gemm.ozaki2` live in ``kernels/*.cu``
next to each scheme's ``cuda.py``, with shared definitions in ``kernels/*.cuh`` headers pulled in
by ``#include "name.cuh"``. :func:`load_source` inlines those local includes (recursively), so
that the one string handed to ``cupy.RawModule`` / NVRTC is the whole translation unit: NVRTC
sees no files, and CuPy's compile cache, keyed on that string and the options, notices a change
to a header. Includes in angle brackets (``<cuda/...>``) are left for the compiler.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["load_source", "local_includes"]

#: ``#include "name"`` on a line of its own (a trailing ``//`` comment allowed).
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"[ \t]*(?://[^\n]*)?$', re.MULTILINE)


def local_includes(text: str) -> list[str]:
    """The names of the ``#include "name"`` directives of ``text``, in order."""
    return _INCLUDE.findall(text)


def _label(path: Path) -> str:
    """The file's name in ``#line`` directives: its last three path parts
    (``ozaki2/kernels/analyse.cu``), enough to tell the schemes' files apart."""
    return "/".join(path.parts[-3:])


def _inline(path: Path, stack: tuple[Path, ...]) -> str:
    if path in stack:
        chain = " -> ".join(p.name for p in (*stack, path))
        raise ValueError(f"#include cycle: {chain}")
    text = path.read_text()
    out: list[str] = [f'#line 1 "{_label(path)}"\n']
    pos = 0
    for match in _INCLUDE.finditer(text):
        target = (path.parent / match.group(1)).resolve()
        if not target.is_file():
            line = text.count("\n", 0, match.start()) + 1
            raise FileNotFoundError(f"{path}:{line}: #include \"{match.group(1)}\": no such file "
                                    f"{target}")
        out.append(text[pos:match.start()])
        out.append(_inline(target, (*stack, path)))
        # back in this file on the line after the directive
        next_line = text.count("\n", 0, match.end()) + 2
        out.append(f'#line {next_line} "{_label(path)}"')
        pos = match.end()
    out.append(text[pos:])
    body = "".join(out)
    return body if body.endswith("\n") else body + "\n"


def load_source(path: str | Path) -> str:
    """The text of the CUDA file ``path`` with each ``#include "name"`` replaced by the text of
    ``name`` (resolved next to the including file), recursively, framed by ``#line`` directives
    so that compiler messages name the right file and line.

    A header is inlined wherever it is included (the headers carry include guards).

    Raises:
        FileNotFoundError: ``path`` or an included file does not exist.
        ValueError: the includes form a cycle.
    """
    return _inline(Path(path).resolve(), ())
