"""fedbandits analysis: load results (`fedbandits_analysis.load`) and draw the papers'
figures (`python -m fedbandits_analysis.figures RESULTS_DIR --out figures/`)."""
