"""The `import_lineup` job: plan, packages, one build per channel, summary."""
