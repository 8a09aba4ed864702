"""Results: an experiment's runs as one table, and what is computed from it.

===========================  ====================================================================================
``esi.results.table``        the run table: a row per Run, each with the jobs it met and for how many seconds;
                             which rows a query selects, and the rows as JSON records and flat columns
``esi.results.metrics``      what runs add up to: makespan, waiting, slot utilisation, failures, each job's
                             runtime alone and beside each neighbour (the co-location matrix)
``esi.results.calibration``  the simulator's co-location table calibrated from runs (CSV or a ConfigMap),
                             and the table's format, which the simulator reads
``esi.results.figures``      the figures, drawn with matplotlib (the analysis extra; the only module that draws)
``esi.results.report``       the report: one self-contained HTML page, the figures as SVG/PDF, the summary
===========================  ====================================================================================

Pure: Runs in, rows, records, figures and pages out (docs/design.md#runs).
"""

__all__: list[str] = []
