"""Corpus runs (capture -> bound -> measure), the zero-violation check, report tables and roofline plots."""

from .corpus import CaseOptions, CaseResult, model_files, run_case, run_cases
from .plot import Point, report_points, roofline_plot

__all__ = ["CaseOptions", "CaseResult", "Point", "model_files", "report_points", "roofline_plot", "run_case",
           "run_cases"]
