"""Evals (docs/evals.md): cases from recorded runs or a dataset, checks,
the eval's input and report. Pure data and pure functions."""
