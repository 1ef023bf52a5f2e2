"""Insights: detectors that say when a job wastes GPUs (idle, underused, straggling, hung, diverging, failing
hardware, lost workers), the findings they store, GPU waste, and alerts to webhooks. See docs/insights.md."""
