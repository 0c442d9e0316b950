"""The records of a run, torch-free: its spec (what defines it and its id), its training
settings and scale, its result and the split record; studies, reports and serving read them."""
