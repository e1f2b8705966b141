"""The `ai_lineup` job: profile, plan, number, build every channel with an agent, report."""
