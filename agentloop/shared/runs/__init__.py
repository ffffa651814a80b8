"""A run's data: the result and its failures, the report, events, workflow
state, snapshots, threads, schedules and transcripts. Imports the definition
and the base layers."""
