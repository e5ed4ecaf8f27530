"""The devices scan: the device list and what is read per listed device, on every kind of run.

`opening` (a run's first two requests; a full scan's plan), `scope` (which devices a full scan
re-reads one by one), `walk` (a full scan's walk of the device list, handed out in parts) and
`devices` (the resources: the list, its history and census, each device's installed apps).
"""
