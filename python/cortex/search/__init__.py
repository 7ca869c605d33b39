"""The search pipeline (DESIGN.md, "Search pipeline"): planning, the Retriever protocol,
the embedded backend's retrievers, fusion, ranking, enrichment and recording.

- :mod:`cortex.search.plan`: a pure function from the query and options to a Plan;
- :mod:`cortex.search.hits`: Hit, Leg, the Retriever protocol, score calibration;
- :mod:`cortex.search.sqlite`: the keyword and semantic retrievers of the SQLite backend;
- :mod:`cortex.search.pipeline`: the steps after retrieval, once each.
"""

from cortex.search.hits import Hit, Leg, Retriever
from cortex.search.plan import Plan, plan

__all__ = ["Hit", "Leg", "Plan", "Retriever", "plan"]
