"""The full-data view ``T.full``: the latest committed record of every key of ``T``, kept
in real time off the produce path (the VENUS paper's full data computed from
incremental data)."""
