"""Running workloads on a GPU: the workload format, the engine, the decomposition, the results."""
