"""The four source datasets every installation knows. Used by migration 0002 and post_migrate."""

BUILTIN_DATASETS = [
    # key, name, study id prefix stripped on import, digits only
    ("mimic-cxr", "MIMIC-CXR", "s", True),
    ("rexgradient", "ReXGradient-160K", "", False),
    ("iu-xray", "IU X-ray (Open-i)", "", False),
    ("chexpert-plus", "CheXpert Plus", "", False),
]


def ensure(dataset_model) -> None:
    for key, name, prefix, numeric in BUILTIN_DATASETS:
        dataset_model.objects.get_or_create(
            key=key, defaults={"name": name, "study_id_prefix": prefix, "numeric_study_ids": numeric}
        )
