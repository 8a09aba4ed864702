"""Results: an experiment's runs as one table, and what is computed from it.

=========================  ====================================================================================
``esi.results.table``      the run table: a row per Run, each with the jobs it met and for how many seconds;
                           which rows a query selects, and the rows as JSON records and flat columns
=========================  ====================================================================================

Pure: Runs in, rows and records out (docs/design.md#runs).
"""

__all__: list[str] = []
