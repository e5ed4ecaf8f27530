"""One run of the source, with no HTTP in it: its ledger, what it keeps in dlt state, how it opens,
which devices a full scan re-reads (`scope`), and a first load walked in parts (`walk`)."""
