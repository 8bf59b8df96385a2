"""Robustness checks: a catalogue of bad requests, the status policy that judges the answers,
a curl renderer for evidence, and hypothesis strategies for fuzzing."""

from __future__ import annotations

from pytest_inferaccept.robustness.cases import CASES_BY_ID, CATALOGUE, Case, Params, RequestSpec, build
from pytest_inferaccept.robustness.config import RobustnessConfig, load_config
from pytest_inferaccept.robustness.curl import render_curl
from pytest_inferaccept.robustness.policy import Judgement, classify, error_shape

__all__ = ["CASES_BY_ID", "CATALOGUE", "Case", "Judgement", "Params", "RequestSpec", "RobustnessConfig",
           "build", "classify", "error_shape", "load_config", "render_curl"]
