"""Study results: realism, equivalence and agreement, from a live study or a release folder.

The statistics are pure functions from pandas DataFrames to tidy tables and know nothing of
Django. Two thin adapters feed them the same DataFrame shape (`analysis.frames.ReleaseFrames`):
one reads a release folder, the other a study's database rows.
"""
