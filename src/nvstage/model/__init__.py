"""Estimating a workload offline: the cost file, the estimate, calibration, and two workloads
compared."""
