"""Contract types of our own for import-linter (``contract_types`` in ``.importlinter``).

``standard_library_only``: each module of ``source_modules`` (and below) imports only the standard library and
modules of its own package, so it runs with the bare system Python before any virtualenv exists. The standard
library is ``sys.stdlib_module_names`` of the Python that runs lint-imports; anything else is named with its line.
"""

from __future__ import annotations

import sys
from typing import Any

import grimp
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck

__all__ = ["StandardLibraryOnlyContract"]


class StandardLibraryOnlyContract(Contract):
    type_name = "standard_library_only"

    source_modules = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        refused: list[dict[str, Any]] = []
        for source in self.source_modules:  # type: ignore[attr-defined]
            package = source.name
            for importer in sorted({package} | graph.find_descendants(package)):
                for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                    own = imported == package or imported.startswith(f"{package}.")
                    if own or imported.partition(".")[0] in sys.stdlib_module_names:
                        continue
                    for detail in graph.get_import_details(importer=importer, imported=imported) or [{}]:
                        refused.append({"importer": importer, "imported": imported, **detail})
        return ContractCheck(kept=not refused, warnings=[], metadata={"refused": refused})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for found in check.metadata["refused"]:
            line = found.get("line_number", "?")
            where = f"{found['importer']} imports {found['imported']} (line {line})"
            output.print_error(f"{where}: not the standard library")
            output.new_line()
