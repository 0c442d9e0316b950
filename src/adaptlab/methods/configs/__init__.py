"""Each method's options, one module per method (and fusion's): the frozen config dataclass,
its validation and its defaults from the paper, and the method's registration. Nothing here
loads torch, so records, listings and help text read methods without it."""
