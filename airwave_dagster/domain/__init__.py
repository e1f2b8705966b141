"""Pure domain: lineup files, filters, import planning, schedules. No I/O, no frameworks."""
