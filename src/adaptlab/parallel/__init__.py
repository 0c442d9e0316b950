"""Which process of a multi-process run this is, and evaluation batches shared out over the
processes: what every layer that evaluates needs of a process group."""
