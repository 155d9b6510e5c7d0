"""fedbandits analysis: load results (`fedbandits_analysis.load`), draw the papers'
figures (`python -m fedbandits_analysis.figures RESULTS_DIR --out figures/`) and
write a sensitivity report for any job (`python -m fedbandits_analysis.report
RESULTS_DIR --out DIR [--html]`)."""
