"""The build's package mapping (the rest of the metadata is in pyproject.toml).

`projections/`, `jobs/` and `restore/` sit beside `memory_ledger/` in the source tree, where
the design card puts them, but install as `memory_ledger.projections`, `memory_ledger.jobs`
and `memory_ledger.restore`: nothing with a generic name lands in site-packages, where an
application's own `jobs` package would otherwise mix with ours. In a source checkout the same
names are resolved by `memory_ledger._source_tree`.
"""

from setuptools import find_packages, setup

MAPPED = ("projections", "jobs", "restore")

setup(
    packages=[
        *find_packages(include=["memory_ledger", "memory_ledger.*"]),
        *(f"memory_ledger.{p}" for p in find_packages(include=[f"{m}*" for m in MAPPED])),
    ],
    package_dir={f"memory_ledger.{m}": m for m in MAPPED},
)
