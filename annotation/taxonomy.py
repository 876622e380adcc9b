"""The taxonomy of MIMIC-CXR-Ext-ReRef: (key, label, dimension) of each variation.

A study copies it on creation and may edit its own copy; the vocabulary is study data, not code.
Plain data (no Django): the analysis reads it to group a release's variations by dimension.
"""

DEFAULT_TAXONOMY: tuple[tuple[str, str, str], ...] = (
    ("structure--structured", "Structure: structured", "Organization"),
    ("structure--free_text", "Structure: free text", "Organization"),
    ("section_assignment", "Section assignment", "Organization"),
    ("findings_scope--exhaustive", "Findings scope: exhaustive", "Completeness"),
    ("findings_scope--minimal", "Findings scope: minimal", "Completeness"),
    ("anatomical_granularity--high", "Anatomical granularity: high", "Granularity"),
    ("anatomical_granularity--low", "Anatomical granularity: low", "Granularity"),
    ("quantitative_granularity--low", "Quantitative granularity: low", "Granularity"),
    ("terminology", "Terminology", "Language"),
    ("hedging", "Hedging", "Language"),
    ("negation--explicit", "Negation: explicit", "Language"),
    ("negation--implicit", "Negation: implicit", "Language"),
)
DEFAULT_DIMENSIONS: dict[str, str] = {key: dimension for key, _, dimension in DEFAULT_TAXONOMY}
