"""What users read: tables, plots and timelines made from results."""
