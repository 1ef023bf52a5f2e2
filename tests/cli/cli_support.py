"""Names the CLI tests share."""

DEMO_JOB = "cli-demo"  # the demo job, loaded once into the session's server
DEMO_PROJECT = "cli"
