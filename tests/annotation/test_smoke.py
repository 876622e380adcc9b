from annotation.services import import_pairs, sample_pairs
from tests.factories import csv_bytes, csv_row


def test_it_imports_and_samples(study):
    report = import_pairs(study, csv_bytes([csv_row(), csv_row()]), filename="x.csv")
    assert report.created == 2
    sample = sample_pairs(study, per_variation=1, seed=1)
    assert sample.pairs == 1
    assert study.examples.count() == 3
