"""kio's schema modules of every served API version, held in memory from start-up.

kio imports the module of a message version the first time it is used. An
import in the middle of a run can fail for reasons that have nothing to do
with the request: no file descriptor left (``EMFILE``; Python's path finder
then takes the package's directory for empty and raises ModuleNotFoundError),
or the package replaced on disk by an install meanwhile. Executing every
module at start-up would make start-up cost most of a second (kio builds a
dataclass per message, version and nested entity: about 2 ms a module), so
``preload`` only reads their compiled code (about 20 ms for every served
version) and puts a finder first on ``sys.meta_path`` that serves those
modules from memory. They still run on first use, but never touch the disk.

The code is kept marshalled, as in a ``.pyc`` file: most modules never run (a broker
serves a few versions of each API), and their code objects took 2.1 MB of the broker's
memory against 1.3 MB for the same code as bytes. The bytes of each API's modules are
kept compressed together (zlib at its fastest level), since one version's code is much like
the next's: 0.16 MB in all, for 5 ms of start-up, and a module's first run then unpacks
its API's 30 to 60 KB first (measured 2026-11-29).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import sys
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import CodeType, ModuleType

from kio.schema.index import api_key_map, schema_name_map


@dataclass(slots=True)
class _Pack:
    """The marshalled code of one API's modules, end to end, compressed once complete."""

    data: bytes | bytearray


@dataclass(frozen=True, slots=True)
class _Preloaded:
    pack: _Pack
    start: int  # where the module's marshalled code lies in the pack, uncompressed
    end: int
    imports: frozenset[str]  # the modules its top-level absolute imports name
    origin: str | None
    is_package: bool

    def code(self) -> CodeType:
        packed = self.pack.data
        unpacked = packed if isinstance(packed, bytearray) else zlib.decompress(packed)
        code: CodeType = marshal.loads(unpacked[self.start : self.end])
        return code


class _PreloadedLoader(importlib.abc.Loader):
    def __init__(self, preloaded: _Preloaded) -> None:
        self._preloaded = preloaded

    def exec_module(self, module: ModuleType) -> None:
        exec(self._preloaded.code(), module.__dict__)


class PreloadedSchemas(importlib.abc.MetaPathFinder):
    """Finds the preloaded modules by name; any other import goes on to the next finder."""

    def __init__(self, modules: dict[str, _Preloaded]) -> None:
        self.modules = modules

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        preloaded = self.modules.get(fullname)
        if preloaded is None:
            return None
        spec = importlib.util.spec_from_loader(
            fullname,
            _PreloadedLoader(preloaded),
            origin=preloaded.origin,
            is_package=preloaded.is_package,
        )
        if spec is not None:
            spec.has_location = preloaded.origin is not None
        return spec


def schema_packages(versions: Iterable[tuple[int, int]]) -> dict[str, list[str]]:
    """kio's package of each (api key, version) pair, with the modules in it that it
    imports (request and response)."""
    packages: dict[str, list[str]] = {}
    for api_key, version in versions:
        paths = schema_name_map[api_key_map[api_key]][version].values()
        modules = [path.split(":")[0] for path in paths]
        packages.setdefault(modules[0].rsplit(".", 1)[0], []).extend(modules)
    return packages


def preload(versions: Iterable[tuple[int, int]]) -> PreloadedSchemas:
    """Reads the compiled code of kio's modules for ``versions`` and serves them from memory
    from now on (idempotent). Raises ImportError when kio lacks one of them: kshim must not
    advertise a version it cannot decode."""
    finder = next((item for item in sys.meta_path if isinstance(item, PreloadedSchemas)), None)
    if finder is None:
        finder = PreloadedSchemas({})
        sys.meta_path.insert(0, finder)
    packs: dict[str, _Pack] = {}
    for package, modules in schema_packages(versions).items():
        if package in finder.modules or package in sys.modules:
            continue
        pack = packs.setdefault(package.rsplit(".", 1)[0], _Pack(bytearray()))
        # Found without importing: importing a version's package runs its modules.
        package_spec = importlib.util.find_spec(package)  # imports kio's empty API package
        finder.modules[package] = _read(package, package_spec, pack)
        search = list(_search_locations(package_spec))
        for name in modules:
            spec = importlib.machinery.PathFinder.find_spec(name, search)
            finder.modules[name] = _read(name, spec, pack)
    for pack in packs.values():
        pack.data = zlib.compress(pack.data, 1)
    # What the schema modules share (kio's nominal types, header schemas): few and small,
    # so imported now rather than read for later.
    for shared in _absolute_imports(finder.modules.values()) - finder.modules.keys():
        importlib.import_module(shared)
    return finder


def _absolute_imports(modules: Iterable[_Preloaded]) -> set[str]:
    """The modules named by the top-level absolute imports of ``modules``' code."""
    return {name for module in modules for name in module.imports}


def _search_locations(spec: importlib.machinery.ModuleSpec | None) -> Sequence[str]:
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("not a package")
    return spec.submodule_search_locations


def _read(name: str, spec: importlib.machinery.ModuleSpec | None, pack: _Pack) -> _Preloaded:
    """The module's code appended to ``pack`` (not yet compressed)."""
    if spec is None or not isinstance(spec.loader, importlib.abc.InspectLoader):
        raise ImportError(f"cannot preload {name}", name=name)
    code = spec.loader.get_code(name)
    if code is None or not isinstance(pack.data, bytearray):
        raise ImportError(f"{name} has no code", name=name)
    start = len(pack.data)
    pack.data += marshal.dumps(code)
    return _Preloaded(
        pack,
        start,
        len(pack.data),
        _named_imports(code),
        spec.origin,
        spec.submodule_search_locations is not None,
    )


def _named_imports(code: CodeType) -> frozenset[str]:
    # A dotted name among a module's names can only be an absolute import's: attribute and
    # variable names have no dots, and a relative import names its module without a dot.
    return frozenset(name for name in code.co_names if "." in name)
