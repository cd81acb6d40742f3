"""Loading numba's cached kernels with only the work a load needs.

numba's disk cache (``cache=True``) stores, per compiled signature, the kernel's machine code,
the LLVM bitcode of the same module (kept to be linked into *later compilations* that call the
kernel) and the kernel's environments (one per compiled function inside it, numba's own array
and linear-algebra helpers included). A load (``numba.core.caching.Cache.load_overload``)
parses the whole bitcode into an LLVM module, walks every function and global of it through
llvmlite to record the names the kernel defines, and rebuilds each environment by importing the
module it belongs to. For the three kernels of a first ``SVC().fit`` (2-core Xeon,
``benchmarks/first_fit.py``) that is about 0.9 MB of bitcode parsed, some 4,000 llvmlite calls
and the import of ``numba.np.arrayobj`` with its dependencies (linear algebra, ufuncs, unicode:
about 0.15 s of CPU time on its own) -- none of which running the loaded machine code needs:

* the names a kernel defines are the global symbols of its machine code, read from the ELF
  symbol table (:func:`elf_defined_symbols`, a few hundred microseconds); the bitcode is parsed
  when something asks for more: a later compilation that links the kernel in, or a symbol
  query the machine code's names do not answer (:class:`LazyLibrary`, :class:`LazyEngine`);
* an environment of numba's own nopython helpers (``numba.np.arrayobj.ol_np_empty...``) is
  read at run time for its constants only (it has none); its module's globals serve object
  mode alone. While that module is not imported, the environment is built with its name as
  globals (:func:`rebuild_env`) instead of importing the module for it.

The loaded machine code is the same bytes either way; what a load leaves behind answers every
question numba asks as before (the defined-symbol set fills up on the first question it cannot
answer). Anything unexpected -- another object format, a numba whose internals differ -- takes
numba's own path.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import struct
import sys

__all__ = ["elf_defined_symbols", "rebuild_env", "light_loading"]


def elf_defined_symbols(object_code: bytes) -> frozenset[str] | None:
    """Names of the global and weak symbols a 64-bit little-endian ELF object defines.

    Parameters
    ----------
    object_code : bytes
        An object file (what LLVM emits for the host on Linux x86-64 and AArch64).

    Returns
    -------
    frozenset of str, or None
        The names of the symbol-table entries bound ``STB_GLOBAL`` or ``STB_WEAK`` with a
        section index other than ``SHN_UNDEF`` -- the symbols the object exports to the
        dynamic linker, the functions and variables of the module that are not internal; None
        when ``object_code`` is not such an ELF file or is malformed.
    """
    try:
        if object_code[:6] != b"\x7fELF\x02\x01":  # magic, 64-bit, little-endian
            return None
        (shoff,) = struct.unpack_from("<Q", object_code, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", object_code, 0x3A)
        # Section header: name, type, flags, addr, offset, size, link, info, align, entsize.
        sections = [struct.unpack_from("<IIQQQQIIQQ", object_code, shoff + k * shentsize)
                    for k in range(shnum)]
        names = set()
        for section in sections:
            if section[1] != 2:  # SHT_SYMTAB
                continue
            offset, size, link = section[4], section[5], section[6]
            strings = sections[link][4]
            table = object_code[offset:offset + size]
            for name, info, _other, index, _value, _size in struct.iter_unpack("<IBBHQQ", table):
                if index == 0 or info >> 4 not in (1, 2):  # undefined, or local
                    continue
                start = strings + name
                names.add(object_code[start:object_code.index(b"\0", start)].decode())
        return frozenset(names)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None


def rebuild_env(modname, consts, env_name):
    """numba's ``environment._rebuild_env``, without importing a numba module for its globals.

    An environment holds a module's globals (read by object-mode code only) and the constants
    of a compiled function (read at run time). The helpers numba compiles from its own modules
    are nopython functions without constants; while such a module is not imported, the
    environment's globals are ``{"__name__": modname}`` -- what its pickling and
    ``can_cache`` read -- instead of the module's. Every other environment is numba's own.
    """
    from numba.core import environment  # noqa: PLC0415 - numba is imported by then

    env = environment.lookup_environment(env_name)
    if env is not None:
        return env
    if consts or modname in sys.modules or not str(modname).startswith("numba."):
        return environment._rebuild_env(modname, consts, env_name)
    env = environment.Environment({"__name__": modname})
    env.env_name = env_name
    environment.Environment._memo[env_name] = env
    return env


class _Unpickler(pickle.Unpickler):
    """``pickle.loads`` of a cached kernel, with :func:`rebuild_env` for numba's."""

    def find_class(self, module, name):
        if module == "numba.core.environment" and name == "_rebuild_env":
            return rebuild_env
        return super().find_class(module, name)


def _make_classes():
    """The cache file, library and engine classes of a light load, or None where numba's
    internals are not the ones this module was written against."""
    try:
        import llvmlite.binding as ll  # type: ignore[import-untyped]  # noqa: PLC0415
        from numba.core import caching, codegen  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        return None
    needed = {caching.IndexDataCacheFile: ("_load_data", "_data_path"),
              codegen.JITCodeLibrary: ("_unserialize", "_get_module_for_linking",
                                       "enable_object_caching", "_set_compiled_object",
                                       "_finalize_final_module"),
              codegen.JitEngine: ("is_symbol_defined", "_load_defined_symbols"),
              codegen.JITCPUCodegen: ("unserialize_library",)}
    if not all(hasattr(cls, name) for cls, names in needed.items() for name in names):
        return None  # pragma: no cover

    class CacheFile(caching.IndexDataCacheFile):
        """numba's index and data files, the data unpickled with :func:`rebuild_env`."""

        def _load_data(self, name):
            with open(self._data_path(name), "rb") as f:
                return _Unpickler(io.BytesIO(f.read())).load()

    class LazyEngine(codegen.JitEngine):
        """numba's execution engine, whose defined-symbol set takes a loaded library's names
        from its machine code and completes them from its bitcode on the first miss."""

        def defer(self, library, symbols):
            self._defined_symbols |= symbols
            self.__dict__.setdefault("_deferred", []).append(library)

        def is_symbol_defined(self, name):
            if name not in self._defined_symbols:
                deferred = self.__dict__.get("_deferred")
                while deferred:  # what numba's load would have recorded
                    self._load_defined_symbols(deferred.pop()._get_module_for_linking())
            return name in self._defined_symbols

    class LazyLibrary(codegen.JITCodeLibrary):
        """A library loaded from the cache whose bitcode is parsed on first use."""

        _shared_bitcode = None

        @classmethod
        def unserialize(cls, cg, state):
            """numba's ``_unserialize`` of object code, the bitcode left unparsed."""
            name, kind, data = state
            symbols = elf_defined_symbols(data[0]) if kind == "object" else None
            engine = cg._engine
            if symbols is None or type(engine) not in (codegen.JitEngine, LazyEngine) or \
                    cg._library_class is not codegen.JITCodeLibrary:
                return type(cg).unserialize_library(cg, state)
            self = cls(cg, name)
            self.enable_object_caching()
            self._set_compiled_object(data[0])
            self._shared_bitcode = data[1]
            self._finalize_final_module()
            engine.__class__ = LazyEngine  # same state, two methods added
            engine.defer(self, symbols)
            return self

        def _get_module_for_linking(self):
            if self._shared_bitcode is not None:
                self._shared_module = ll.parse_bitcode(self._shared_bitcode)
                self._shared_bitcode = None
            return super()._get_module_for_linking()

    return CacheFile, LazyLibrary


# (CacheFile, LazyLibrary), made by the first light load; () where numba's internals differ.
_LIGHT: tuple | None = None


@contextlib.contextmanager
def light_loading(cache, target_context):
    """Within the block, ``cache`` (a numba ``FunctionCache``) loads lightly: its data files
    unpickled with :func:`rebuild_env`, libraries unserialized by :class:`LazyLibrary`.

    Runs under numba's compiler lock (as numba's loads do): the codegen is shared.
    """
    global _LIGHT
    from numba.core.compiler_lock import global_compiler_lock  # noqa: PLC0415

    if _LIGHT is None:
        _LIGHT = _make_classes() or ()
    if not _LIGHT:  # pragma: no cover - numba's internals differ
        yield
        return
    cache_file_class, library_class = _LIGHT
    with global_compiler_lock:
        cache_file = getattr(cache, "_cache_file", None)
        if type(cache_file) is cache_file_class.__mro__[1]:
            cache_file.__class__ = cache_file_class
        cg = target_context.codegen()
        outer = "unserialize_library" not in vars(cg)  # not inside another light load
        if outer:
            cg.unserialize_library = lambda state: library_class.unserialize(cg, state)
        try:
            yield
        finally:
            if outer:
                del cg.unserialize_library
