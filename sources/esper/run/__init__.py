"""One run's bookkeeping, with no HTTP and no table in it: its context (`ledger`), what the API
refused (`refusals`), and what it keeps in dlt state between runs (`state`: every key, and how a
watermark moves). What the run reads is above it: the tables (`tables/`) and the devices scan
(`scan/`: the run's opening, a full scan's scope and walk)."""
