"""fedbandits analysis: load results (`analysis.load`) and draw the papers'
figures (`python -m analysis.figures RESULTS_DIR --out figures/`)."""
