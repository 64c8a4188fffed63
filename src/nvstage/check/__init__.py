"""Budgets for CI: the metrics of a build, the budgets file, the gate."""
